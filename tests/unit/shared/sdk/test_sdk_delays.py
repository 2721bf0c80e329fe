"""The SDK's delayed delivery: ``AsyncProducer.send(deliver_after_ms=, deliver_at=)`` writes the
``yak-deliver-at`` header (checked here first, then by the proxy with the topic's configs), and
``AsyncAdmin.list_scheduled``/``cancel_scheduled`` — against an in-process proxy and broker
(topic ``d`` allows delays of up to a day, ``t`` none)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from tests.unit.broker.broker_harness import BrokerHarness
from tests.unit.rest_proxy.delays_inprocess import DAY_MS, proxy_with_delays
from yak.delays import DELIVER_AT_HEADER
from yak.errors import (
    DelaysNotEnabledError,
    InvalidDelayError,
    RecordAlreadyDueError,
    ScheduledRecordNotFoundError,
)
from yak.record.batch import decode_batch
from yak.sdk import AsyncProducer
from yak.sdk.admin import AsyncAdmin
from yak.sdk.producer import with_delay
from yak.types import TopicPartition

NOW = 1_767_225_600_000


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncBaseTransport, BrokerHarness]]:
    async with proxy_with_delays(tmp_path) as (client, broker):
        yield client._transport, broker


def _dues(broker: BrokerHarness, topic: str) -> list[int | None]:
    log = broker.broker.replicas.replicas[TopicPartition(topic, 0)].log
    read = log.read(0, 1 << 20)
    dues: list[int | None] = []
    position = 0
    while position < len(read.records):
        decoded = decode_batch(read.records, position)
        for record in decoded.records:
            value = dict(record.headers).get(DELIVER_AT_HEADER)
            dues.append(None if value is None else int(value))
        position += decoded.header.size
    return dues


def test_with_delay_adds_the_header_from_the_clock() -> None:
    assert with_delay((("a", b"1"),), 5_000, None, NOW) == (
        ("a", b"1"),
        (DELIVER_AT_HEADER, str(NOW + 5_000).encode()),
    )
    zoned = datetime(2026, 1, 1, 1, tzinfo=UTC)
    assert with_delay((), None, zoned, NOW) == ((DELIVER_AT_HEADER, str(NOW + 3_600_000).encode()),)
    assert with_delay((), None, NOW - 5, NOW)[0][1] == str(NOW - 5).encode()  # past: due now


@pytest.mark.parametrize(
    ("after", "at", "headers", "message"),
    [
        (-1, None, (), "must be >= 0"),
        (1, NOW, (), "not both"),
        (None, 1_000, (), "before 2000"),
        (None, datetime(2026, 1, 1), (), "no time zone"),
        (1, None, ((DELIVER_AT_HEADER, b"1"),), "not both"),
    ],
)
def test_with_delay_refuses_what_no_topic_allows(
    after: int | None,
    at: int | datetime | None,
    headers: tuple[tuple[str, bytes | None], ...],
    message: str,
) -> None:
    with pytest.raises(InvalidDelayError, match=message):
        with_delay(headers, after, at, NOW)


async def test_send_writes_the_header_and_plain_records_go_without(
    stack: tuple[httpx.AsyncBaseTransport, BrokerHarness],
) -> None:
    transport, broker = stack
    at = datetime.now(UTC) + timedelta(hours=1)
    before = int(time.time() * 1000)
    async with AsyncProducer("http://proxy", transport=transport, linger_ms=0) as producer:
        first = await producer.send_and_wait("d", b"later", deliver_after_ms=60_000)
        await producer.send_and_wait("d", b"at", deliver_at=at)
        await producer.send_and_wait("d", b"now")
        with pytest.raises(InvalidDelayError, match=">= 0"):
            await producer.send("d", b"x", deliver_after_ms=-5)
    after = int(time.time() * 1000)
    assert first.offset == 0
    dues = _dues(broker, "d")
    assert len(dues) == 3
    assert dues[0] is not None
    assert before + 60_000 <= dues[0] <= after + 60_000
    assert dues[1] == int(at.timestamp() * 1000)
    assert dues[2] is None


async def test_the_proxy_refuses_what_the_topic_does_not_allow(
    stack: tuple[httpx.AsyncBaseTransport, BrokerHarness],
) -> None:
    transport, broker = stack
    async with AsyncProducer(
        "http://proxy", transport=transport, linger_ms=0, retries=0
    ) as producer:
        with pytest.raises(DelaysNotEnabledError):
            await producer.send_and_wait("t", b"x", deliver_after_ms=1_000)
        with pytest.raises(InvalidDelayError, match=r"delayed\.delivery\.max\.ms"):
            await producer.send_and_wait("d", b"x", deliver_after_ms=DAY_MS + 60_000)
    assert _dues(broker, "t") == []
    assert _dues(broker, "d") == []


async def test_admin_lists_pages_and_cancels(
    stack: tuple[httpx.AsyncBaseTransport, BrokerHarness],
) -> None:
    transport, _broker = stack
    async with (
        AsyncProducer("http://proxy", transport=transport, linger_ms=0) as producer,
        AsyncAdmin("http://proxy", transport=transport) as admin,
    ):
        for delay in (30_000, 10_000, 20_000):
            await producer.send_and_wait("d", b"v", deliver_after_ms=delay)
        past = int(time.time() * 1000) - 1
        await producer.send_and_wait("d", b"due", deliver_at=past)

        page = await admin.list_scheduled("d", 0, limit=2)
        assert [r.offset for r in page.records] == [1, 2]
        assert page.next is not None
        rest = await admin.list_scheduled(
            "d", 0, after_ms=page.next.after_ms, after_offset=page.next.after_offset
        )
        assert ([r.offset for r in rest.records], rest.next) == ([0], None)

        cancelled = await admin.cancel_scheduled("d", 0, 2)
        assert (cancelled.offset, cancelled.deliver_at) == (2, page.records[1].deliver_at)
        assert [r.offset for r in (await admin.list_scheduled("d", 0)).records] == [1, 0]
        with pytest.raises(ScheduledRecordNotFoundError):
            await admin.cancel_scheduled("d", 0, 2)
        with pytest.raises(RecordAlreadyDueError):
            await admin.cancel_scheduled("d", 0, 3)
        with pytest.raises(DelaysNotEnabledError):
            await admin.list_scheduled("t", 0)
