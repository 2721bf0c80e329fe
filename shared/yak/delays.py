"""Delayed and scheduled delivery: the ``yak-deliver-at`` header and the cancel control record.

**The header.** A record is delayed by the header ``yak-deliver-at`` whose value is the due
time in epoch milliseconds, ASCII decimal (``b"1767225600000"``: digits only, no sign, no
spaces, at most 19 digits, at most 2**63 - 1). ``deliver_after_ms`` on the APIs is turned
into that header from the producer's clock by ``resolve_delay``. Kafka headers may repeat;
the last ``yak-deliver-at`` counts (Kafka's ``Headers.lastHeader``), and the produce side
refuses a record that carries it twice.

Two readings of the header, on purpose:

* **Produce side, strict** (``check_delay_headers``, ``parse_deliver_at``): a malformed,
  repeated, absurd (before 2000-01-01, or after now + ``delayed.delivery.max.ms``) header is
  refused with ``InvalidDelayError`` (400 ``INVALID_DELAY``) naming the value and the rule; a
  header on a topic without ``delayed.delivery.enable=true`` with ``DelaysNotEnabledError``.
* **Log side, tolerant** (``deliver_at_of``): a record already in the log whose header does
  not parse is **not delayed** (``None``). Such records exist only if a client wrote around the
  REST produce path (the Kafka listener does not decode records) or the topic enabled delays
  later; holding a record back for ever, or failing the partition's delay index, would be
  worse than delivering it at its offset.

**The cancel control record.** Cancelling a scheduled record appends one Kafka control batch
(attributes bit 5 set, not transactional, producer id -1) holding one record:

    key    version int16 = 0, type int16 = CANCEL_CONTROL_TYPE (0x5901)      Kafka's control
                                                                             key layout
    value  version int16 = 0, offset int64, deliver_at_ms int64              big-endian

``offset``/``deliver_at_ms`` name the cancelled record and the due time it carries (which
tells the delay index the bucket to mark). Kafka uses control types 0-6 (ABORT, COMMIT,
LEADER_CHANGE, SNAPSHOT_HEADER/FOOTER, KRAFT_VERSION, KRAFT_VOTERS); 0x5901 ("Y", 1) is far
from them, and Kafka's consumers skip control batches of any type, so a Kafka client reading a
delayed topic never sees a cancel. Clients may not write control batches (the log validator
refuses them): the broker appends the cancel itself.

Pure functions and immutable values; safe from any thread. No I/O, no clock: ``now_ms`` is an
argument.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from yak.errors import DelaysNotEnabledError, InvalidDelayError, InvalidRecordError
from yak.record.batch import encode_batch
from yak.record.record import Header, Headers, RecordInput
from yak.topic_config import (
    CATALOGUE,
    DELAYED_DELIVERY_ENABLE,
    DELAYED_DELIVERY_MAX_MS,
    is_enabled,
)

__all__ = [
    "CANCEL_CONTROL_TYPE",
    "DELIVER_AT_HEADER",
    "EARLIEST_DELIVER_AT_MS",
    "CancelRecord",
    "DelaySettings",
    "cancel_batch",
    "check_delay_headers",
    "decode_cancel",
    "delay_header",
    "delay_settings",
    "deliver_at_of",
    "parse_deliver_at",
    "resolve_delay",
]

DELIVER_AT_HEADER = "yak-deliver-at"
#: 2000-01-01T00:00:00Z: a due time before it is a unit mistake (seconds for milliseconds).
EARLIEST_DELIVER_AT_MS = 946_684_800_000
#: Yak's control record type for a cancelled delay (Kafka's own types are 0-6).
CANCEL_CONTROL_TYPE = 0x5901

_MAX_DIGITS = 19
_INT64_MAX = 2**63 - 1
_CONTROL_KEY = struct.Struct(">hh")
_CANCEL_VALUE = struct.Struct(">hqq")
_VERSION = 0


class DelaySettings(NamedTuple):
    """A topic's delayed-delivery configs, parsed."""

    enabled: bool
    max_delay_ms: int


class CancelRecord(NamedTuple):
    """What a cancel control record names: the scheduled record and the due time it carries."""

    offset: int
    deliver_at_ms: int


def delay_settings(configs: Mapping[str, str]) -> DelaySettings:
    """The delay configs of a topic from its overrides (defaults where absent)."""
    raw_max = configs.get(DELAYED_DELIVERY_MAX_MS, CATALOGUE[DELAYED_DELIVERY_MAX_MS].default)
    return DelaySettings(is_enabled(configs, DELAYED_DELIVERY_ENABLE), int(raw_max))


def _parse(raw: bytes | None) -> int | None:
    if raw is None or not 0 < len(raw) <= _MAX_DIGITS or not raw.isdigit():
        return None  # bytes.isdigit is ASCII-only: no sign, space, or non-ASCII digit passes
    value = int(raw)
    return value if value <= _INT64_MAX else None


def deliver_at_of(headers: Iterable[Header]) -> int | None:
    """The due time a record in the log carries, or ``None``: not delayed (tolerant reading).

    The last ``yak-deliver-at`` header counts; one whose value does not parse means "not
    delayed" (see the module docstring for why the log side never refuses).
    """
    found: bytes | None = None
    present = False
    for key, value in headers:
        if key == DELIVER_AT_HEADER:
            found, present = value, True
    return _parse(found) if present else None


def parse_deliver_at(raw: bytes | None) -> int:
    """A header value as the produce side reads it; raises InvalidDelayError if malformed."""
    value = _parse(raw)
    if value is None:
        shown = raw[:40] if raw is not None else None
        raise InvalidDelayError(
            f"header {DELIVER_AT_HEADER} must be the due time in epoch milliseconds as ASCII "
            f"decimal digits (at most {_MAX_DIGITS}), got {shown!r}",
            header=DELIVER_AT_HEADER,
        )
    return value


def delay_header(deliver_at_ms: int) -> Header:
    """The header that delays a record until ``deliver_at_ms``."""
    if not 0 <= deliver_at_ms <= _INT64_MAX:
        raise InvalidDelayError(f"deliver_at {deliver_at_ms} is not a valid epoch millisecond")
    return (DELIVER_AT_HEADER, str(deliver_at_ms).encode("ascii"))


def _check_deliver_at(deliver_at_ms: int, now_ms: int, max_delay_ms: int, what: str) -> None:
    if deliver_at_ms < EARLIEST_DELIVER_AT_MS:
        raise InvalidDelayError(
            f"{what} {deliver_at_ms} is before 2000-01-01T00:00:00Z "
            f"({EARLIEST_DELIVER_AT_MS}): epoch milliseconds are expected",
            deliver_at=deliver_at_ms,
        )
    if deliver_at_ms > now_ms + max_delay_ms:
        raise InvalidDelayError(
            f"{what} {deliver_at_ms} is {deliver_at_ms - now_ms} ms from now, beyond the "
            f"topic's {DELAYED_DELIVERY_MAX_MS} of {max_delay_ms}",
            deliver_at=deliver_at_ms,
            max_delay_ms=max_delay_ms,
        )


def resolve_delay(
    deliver_after_ms: int | None, deliver_at_ms: int | None, now_ms: int, max_delay_ms: int
) -> int | None:
    """The due time a produce request asks for (``None``: not delayed), validated.

    ``deliver_after_ms`` counts from ``now_ms`` (the producer's clock); ``deliver_at_ms`` is
    absolute and may lie in the past (the record is then due at once). Raises
    InvalidDelayError when both are given, the delay is negative or above ``max_delay_ms``, or
    the time is before 2000 or after ``now_ms + max_delay_ms``.
    """
    if deliver_after_ms is not None and deliver_at_ms is not None:
        raise InvalidDelayError("give deliver_after_ms or deliver_at, not both")
    if deliver_after_ms is not None:
        if deliver_after_ms < 0:
            raise InvalidDelayError(
                f"deliver_after_ms must be >= 0, got {deliver_after_ms}",
                deliver_after_ms=deliver_after_ms,
            )
        if deliver_after_ms > max_delay_ms:
            raise InvalidDelayError(
                f"deliver_after_ms {deliver_after_ms} is beyond the topic's "
                f"{DELAYED_DELIVERY_MAX_MS} of {max_delay_ms}",
                deliver_after_ms=deliver_after_ms,
                max_delay_ms=max_delay_ms,
            )
        return now_ms + deliver_after_ms
    if deliver_at_ms is not None:
        _check_deliver_at(deliver_at_ms, now_ms, max_delay_ms, "deliver_at")
    return deliver_at_ms


def check_delay_headers(headers: Headers, now_ms: int, settings: DelaySettings) -> int | None:
    """The produce side's check of a record's own headers: its due time or ``None``.

    Raises DelaysNotEnabledError for a ``yak-deliver-at`` header on a topic that does not allow
    delays, and InvalidDelayError for one that is repeated, malformed or out of range.
    """
    values = [value for key, value in headers if key == DELIVER_AT_HEADER]
    if not values:
        return None
    if not settings.enabled:
        raise DelaysNotEnabledError(
            f"this topic does not allow delayed delivery (header {DELIVER_AT_HEADER}); "
            f"set {DELAYED_DELIVERY_ENABLE}=true on it first"
        )
    if len(values) > 1:
        raise InvalidDelayError(
            f"header {DELIVER_AT_HEADER} appears {len(values)} times; give it once"
        )
    deliver_at_ms = parse_deliver_at(values[0])
    _check_deliver_at(deliver_at_ms, now_ms, settings.max_delay_ms, DELIVER_AT_HEADER)
    return deliver_at_ms


def cancel_batch(offset: int, deliver_at_ms: int, timestamp_ms: int) -> bytes:
    """The control batch (base offset 0, to be assigned) that cancels the record at ``offset``."""
    key = _CONTROL_KEY.pack(_VERSION, CANCEL_CONTROL_TYPE)
    value = _CANCEL_VALUE.pack(_VERSION, offset, deliver_at_ms)
    record = RecordInput(key=key, value=value, timestamp=timestamp_ms)
    return encode_batch([record], is_control=True, now_ms=timestamp_ms)


def decode_cancel(key: bytes | None, value: bytes | None) -> CancelRecord | None:
    """The cancel a control record carries; ``None`` for any other control record (a
    transaction marker, a Kafka type). Raises InvalidRecordError for a Yak cancel whose value
    is not the layout above."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return None
    _version, control_type = _CONTROL_KEY.unpack_from(key)
    if control_type != CANCEL_CONTROL_TYPE:
        return None
    if value is None or len(value) != _CANCEL_VALUE.size:
        raise InvalidRecordError(
            f"delay cancel record value must be {_CANCEL_VALUE.size} bytes, got "
            f"{None if value is None else len(value)}"
        )
    version, offset, deliver_at_ms = _CANCEL_VALUE.unpack(value)
    if version != _VERSION or offset < 0 or deliver_at_ms < 0:
        raise InvalidRecordError(
            f"delay cancel record: version {version}, offset {offset}, deliver_at "
            f"{deliver_at_ms} (expected version 0 and non-negative fields)"
        )
    return CancelRecord(offset, deliver_at_ms)
