"""Tests for yak.delays: the header, resolve_delay, the produce-side check, the cancel record."""

from __future__ import annotations

import re
import struct

import pytest

from yak.delays import (
    CANCEL_CONTROL_TYPE,
    DELIVER_AT_HEADER,
    EARLIEST_DELIVER_AT_MS,
    CancelRecord,
    DelaySettings,
    cancel_batch,
    check_delay_headers,
    decode_cancel,
    delay_header,
    delay_settings,
    deliver_at_of,
    parse_deliver_at,
    resolve_delay,
)
from yak.errors import DelaysNotEnabledError, InvalidConfigError, InvalidDelayError
from yak.errors import InvalidRecordError as InvalidRecord
from yak.record import decode_batch
from yak.topic_config import validate_topic_configs

NOW = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY = 86_400_000
MAX = 30 * DAY
ON = DelaySettings(enabled=True, max_delay_ms=MAX)


def test_header_round_trip() -> None:
    header = delay_header(NOW + 5)
    assert header == (DELIVER_AT_HEADER, b"1767225600005")
    assert deliver_at_of([("other", b"1"), header]) == NOW + 5
    assert parse_deliver_at(header[1]) == NOW + 5


def test_the_last_header_counts_on_the_log_side() -> None:
    headers = [delay_header(NOW + 1), ("x", None), delay_header(NOW + 2)]
    assert deliver_at_of(headers) == NOW + 2


@pytest.mark.parametrize(
    "raw", [b"", b"-5", b"+5", b" 5", b"5 ", b"1e3", b"12.5", "١٢".encode(), b"9" * 20, None]
)
def test_a_malformed_value_is_not_delayed_in_the_log_and_refused_at_produce(
    raw: bytes | None,
) -> None:
    assert deliver_at_of([(DELIVER_AT_HEADER, raw)]) is None
    with pytest.raises(InvalidDelayError, match="ASCII decimal digits"):
        parse_deliver_at(raw)


def test_a_value_above_int64_is_not_a_time() -> None:
    assert deliver_at_of([(DELIVER_AT_HEADER, b"9223372036854775808")]) is None
    assert deliver_at_of([(DELIVER_AT_HEADER, b"9223372036854775807")]) == 2**63 - 1


def test_no_header_means_not_delayed() -> None:
    assert deliver_at_of([("yak-deliver-after", b"5")]) is None


def test_resolve_after_counts_from_now() -> None:
    assert resolve_delay(1000, None, NOW, MAX) == NOW + 1000
    assert resolve_delay(0, None, NOW, MAX) == NOW
    assert resolve_delay(MAX, None, NOW, MAX) == NOW + MAX
    assert resolve_delay(None, None, NOW, MAX) is None


def test_resolve_at_is_absolute_and_may_be_past() -> None:
    assert resolve_delay(None, NOW + 7, NOW, MAX) == NOW + 7
    assert resolve_delay(None, NOW - DAY, NOW, MAX) == NOW - DAY
    assert resolve_delay(None, NOW + MAX, NOW, MAX) == NOW + MAX


@pytest.mark.parametrize(
    ("after", "at", "fragment"),
    [
        (5, NOW, "not both"),
        (-1, None, "deliver_after_ms must be >= 0, got -1"),
        (MAX + 1, None, "beyond the topic's delayed.delivery.max.ms of 2592000000"),
        (None, NOW + MAX + 1, "2592000001 ms from now"),
        (None, 1_767_225_600, "before 2000-01-01T00:00:00Z"),
        (None, EARLIEST_DELIVER_AT_MS - 1, "epoch milliseconds are expected"),
    ],
)
def test_resolve_refuses_with_a_precise_message(
    after: int | None, at: int | None, fragment: str
) -> None:
    with pytest.raises(InvalidDelayError, match=re.escape(fragment)) as caught:
        resolve_delay(after, at, NOW, MAX)
    assert caught.value.http_status == 400
    assert caught.value.code == "INVALID_DELAY"


def test_produce_check_passes_a_good_header() -> None:
    assert check_delay_headers((delay_header(NOW + 9),), NOW, ON) == NOW + 9
    assert check_delay_headers((("k", b"v"),), NOW, ON) is None
    assert check_delay_headers((("k", b"v"),), NOW, DelaySettings(False, MAX)) is None


def test_produce_check_refuses_a_delay_on_a_topic_without_them() -> None:
    with pytest.raises(
        DelaysNotEnabledError, match=re.escape("delayed.delivery.enable=true")
    ) as caught:
        check_delay_headers((delay_header(NOW + 9),), NOW, DelaySettings(False, MAX))
    assert (caught.value.code, caught.value.http_status) == ("DELAYS_NOT_ENABLED", 400)


@pytest.mark.parametrize(
    ("headers", "fragment"),
    [
        ((delay_header(NOW), delay_header(NOW)), "appears 2 times"),
        (((DELIVER_AT_HEADER, b"soon"),), "got b'soon'"),
        (((DELIVER_AT_HEADER, b"5"),), "before 2000"),
        ((delay_header(NOW + MAX + 1),), "beyond the topic's"),
    ],
)
def test_produce_check_refuses_a_bad_header(
    headers: tuple[tuple[str, bytes], ...], fragment: str
) -> None:
    with pytest.raises(InvalidDelayError, match=re.escape(fragment)):
        check_delay_headers(headers, NOW, ON)


def test_delay_header_refuses_a_negative_time() -> None:
    with pytest.raises(InvalidDelayError):
        delay_header(-1)


def test_topic_configs_default_and_bounds() -> None:
    assert delay_settings({}) == DelaySettings(False, 30 * DAY)
    normalised = validate_topic_configs(
        {"delayed.delivery.enable": "TRUE", "delayed.delivery.max.ms": str(DAY)}
    )
    assert delay_settings(normalised) == DelaySettings(True, DAY)
    with pytest.raises(InvalidConfigError, match="must be <= 31536000000"):
        validate_topic_configs({"delayed.delivery.max.ms": str(366 * DAY)})
    with pytest.raises(InvalidConfigError, match="must be >= 1"):
        validate_topic_configs({"delayed.delivery.max.ms": "0"})
    with pytest.raises(InvalidConfigError, match="true or false"):
        validate_topic_configs({"delayed.delivery.enable": "yes"})


def test_cancel_batch_is_one_control_record_in_kafkas_key_layout() -> None:
    raw = cancel_batch(41, NOW + 60_000, timestamp_ms=NOW)
    batch = decode_batch(raw)
    assert batch.header.is_control
    assert not batch.header.is_transactional
    assert batch.header.producer_id == -1
    (record,) = batch.records
    assert record.key == struct.pack(">hh", 0, CANCEL_CONTROL_TYPE)
    assert record.value == struct.pack(">hqq", 0, 41, NOW + 60_000)
    assert decode_cancel(record.key, record.value) == CancelRecord(41, NOW + 60_000)


def test_other_control_records_are_not_cancels() -> None:
    commit_marker = struct.pack(">hh", 0, 1)
    assert decode_cancel(commit_marker, struct.pack(">hi", 0, 3)) is None
    assert decode_cancel(None, None) is None
    assert decode_cancel(b"\x00", None) is None


@pytest.mark.parametrize(
    "value",
    [
        None,
        b"",
        struct.pack(">hq", 0, 1),
        struct.pack(">hqq", 1, 1, 1),
        struct.pack(">hqq", 0, -1, 1),
    ],
)
def test_a_damaged_cancel_is_an_invalid_record(value: bytes | None) -> None:
    with pytest.raises(InvalidRecord):
        decode_cancel(struct.pack(">hh", 0, CANCEL_CONTROL_TYPE), value)
