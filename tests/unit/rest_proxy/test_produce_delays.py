"""Tests for yak_rest_proxy.api.native.produce_delays and the native produce routes' delays:
``deliver_after_ms`` / ``deliver_at`` per record and per request become the ``yak-deliver-at``
header; bad delays and delays on a topic without them are refused whole."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.unit.broker.broker_harness import BrokerHarness
from tests.unit.rest_proxy.delays_inprocess import DAY_MS, proxy_with_delays
from yak.delays import DELIVER_AT_HEADER, DelaySettings
from yak.errors import DelaysNotEnabledError, InvalidDelayError
from yak.record import RecordInput, encode_batch
from yak.record.batch import decode_batch
from yak.types import TopicPartition
from yak_rest_proxy.api.native.batch_body import check_batch
from yak_rest_proxy.api.native.produce_body import fast_outgoing
from yak_rest_proxy.api.native.produce_delays import deliver_at_ms, record_headers

NOW = 1_767_225_600_000
ON = DelaySettings(enabled=True, max_delay_ms=DAY_MS)
OFF = DelaySettings(enabled=False, max_delay_ms=DAY_MS)


def test_a_delay_becomes_the_header_from_the_clock() -> None:
    headers = record_headers((("a", b"1"),), 30_000, None, NOW, ON, "records[0]")
    assert headers == (("a", b"1"), (DELIVER_AT_HEADER, str(NOW + 30_000).encode()))


def test_deliver_at_takes_epoch_ms_or_a_zoned_time() -> None:
    zoned = datetime(2026, 1, 1, 1, tzinfo=UTC)
    assert deliver_at_ms(zoned, "r") == NOW + 3_600_000
    assert deliver_at_ms(NOW, "r") == NOW
    with pytest.raises(InvalidDelayError, match="no time zone"):
        deliver_at_ms(datetime(2026, 1, 1), "r")


def test_refusals_name_the_rule() -> None:
    with pytest.raises(DelaysNotEnabledError):
        record_headers((), 1_000, None, NOW, OFF, "records[0]")
    with pytest.raises(InvalidDelayError, match="beyond"):
        record_headers((), DAY_MS + 1, None, NOW, ON, "records[0]")
    with pytest.raises(InvalidDelayError, match="not both"):
        record_headers((), 1, NOW, NOW, ON, "records[0]")
    with pytest.raises(InvalidDelayError, match="both a delay field"):
        record_headers(((DELIVER_AT_HEADER, b"1"),), 1, None, NOW, ON, "records[0]")
    with pytest.raises(DelaysNotEnabledError):  # a client's own header, on a plain topic
        record_headers(((DELIVER_AT_HEADER, str(NOW).encode()),), None, None, NOW, OFF, "r")


def test_the_fast_lane_leaves_delays_to_the_model_path() -> None:
    assert fast_outgoing(b'{"records": [{"value": 1}]}', NOW) is not None
    assert fast_outgoing(b'{"records": [{"value": 1, "deliver_after_ms": 5}]}', NOW) is None
    assert fast_outgoing(b'{"records": [{"value": 1}], "deliver_after_ms": 5}', NOW) is None
    header = b'{"records": [{"value": 1, "headers": [{"key": "yak-deliver-at", "value": "1"}]}]}'
    assert fast_outgoing(header, NOW) is None


def test_binary_batches_have_their_headers_checked() -> None:
    def batch(header: bytes) -> bytes:
        record = RecordInput(value=b"v", headers=((DELIVER_AT_HEADER, header),))
        return encode_batch([record], producer_id=1, producer_epoch=0, base_sequence=0, now_ms=NOW)

    good = batch(str(NOW + 5).encode())
    check_batch(good, topic="d", max_message_bytes=1 << 20, max_records=10, delays=ON, now_ms=NOW)
    with pytest.raises(DelaysNotEnabledError):
        check_batch(
            good, topic="t", max_message_bytes=1 << 20, max_records=10, delays=OFF, now_ms=NOW
        )
    with pytest.raises(InvalidDelayError):
        check_batch(batch(b"soon"), topic="d", max_message_bytes=1 << 20, max_records=10, delays=ON)


async def _headers_at(broker: BrokerHarness, topic: str) -> list[dict[str, bytes | None]]:
    log = broker.broker.replicas.replicas[TopicPartition(topic, 0)].log
    read = log.read(0, 1 << 20)
    out = []
    position = 0
    while position < len(read.records):
        decoded = decode_batch(read.records, position)
        out += [dict(r.headers) for r in decoded.records]
        position += decoded.header.size
    return out


async def test_produce_with_delays_writes_the_headers(tmp_path: Path) -> None:
    async with proxy_with_delays(tmp_path) as (client, broker):
        before = int(time.time() * 1000)
        at = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        body = {
            "deliver_after_ms": 60_000,
            "records": [{"value": 1}, {"value": 2, "deliver_at": at}, {"value": 3}],
        }
        answer = await client.post("/api/v1/topics/d/records", json=body)
        assert answer.status_code == 200, answer.text
        headers = await _headers_at(broker, "d")
        dues = [int(h[DELIVER_AT_HEADER] or b"") for h in headers]
        assert before + 60_000 <= dues[0] <= int(time.time() * 1000) + 60_000
        assert dues[2] == dues[0]
        assert abs(dues[1] - (before + 3_600_000)) < 60_000


async def test_a_delay_to_a_topic_without_delays_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    async with proxy_with_delays(tmp_path) as (client, broker):
        body = {"records": [{"value": 1}, {"value": 2, "deliver_after_ms": 1_000}]}
        answer = await client.post("/api/v1/topics/t/records", json=body)
        assert answer.status_code == 400
        assert answer.json()["code"] == "DELAYS_NOT_ENABLED"
        too_far = {"records": [{"value": 1, "deliver_after_ms": 2 * DAY_MS}]}
        answer = await client.post("/api/v1/topics/d/records", json=too_far)
        assert answer.status_code == 400
        assert answer.json()["code"] == "INVALID_DELAY"
        replicas = broker.broker.replicas.replicas
        assert replicas[TopicPartition("t", 0)].log.log_end_offset == 0
        assert replicas[TopicPartition("d", 0)].log.log_end_offset == 0
