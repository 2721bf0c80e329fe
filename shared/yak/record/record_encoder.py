"""Encoding the records section of a RecordBatch v2 (the bytes after the 61-byte header).

Layout of each record: see ``yak.record.record``. This module turns a sequence of
``RecordInput`` into that section (uncompressed) and reports what the batch header needs:
record count, lastOffsetDelta, baseTimestamp and maxTimestamp.

A record's bytes from keyLength to its end (key, value, headers) do not depend on its place in
a batch: ``encode_record_body`` writes them once, and ``encode_bodies`` frames such bodies
(length, attributes, timestampDelta, offsetDelta 0, 1, 2 ...) into a records section, byte for
byte what ``encode_records`` writes for the same records. The rest-proxy's producer encodes each
record's body when it is queued and frames the batch when it is sent.

Invariants enforced here: offset deltas are >= 0 and strictly increasing and fit an int32;
timestamp deltas fit an int64; header keys are ``str`` (written as UTF-8). A breach raises
``InvalidRecordError`` and nothing is returned.

Speed: one pass, no per-record function calls on the common path. Every length and delta
below ``SMALL_LIMIT`` takes its varint from the precomputed ``VARINT_OF`` table, and the
pieces of all records are joined once at the end. Pure function; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from yak.errors import InvalidRecordError
from yak.record.record import Headers, RecordInput
from yak.record.varint import SMALL_LIMIT, VARINT_OF, encode_varint, encode_varlong

__all__ = ["EncodedRecords", "encode_bodies", "encode_record_body", "encode_records"]

_NULL = b"\x01"  # zig-zag -1: a null key, value or header value
_ZERO = b"\x00"  # zig-zag 0: the attributes byte, and an empty header list


class EncodedRecords(NamedTuple):
    """The uncompressed records section plus the header fields derived from the records."""

    data: bytes
    record_count: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int


def _encode_headers(headers: Headers) -> bytes:
    parts = [encode_varint(len(headers))]
    for key, value in headers:
        raw_key = key.encode("utf-8")
        parts.append(encode_varint(len(raw_key)))
        parts.append(raw_key)
        if value is None:
            parts.append(_NULL)
        else:
            parts.append(encode_varint(len(value)))
            parts.append(value)
    return b"".join(parts)


def encode_records(
    records: Sequence[RecordInput], base_timestamp: int | None, now_ms: int
) -> EncodedRecords:
    """Encode ``records``; timestamps of ``None`` become ``now_ms``.

    ``base_timestamp`` of ``None`` means the first record's timestamp (what Kafka's producer
    writes); an explicit one (e.g. a compacted batch keeping its original base) may be later
    than some records, giving negative deltas.
    """
    try:
        return _encode(records, base_timestamp, now_ms)
    except (ValueError, UnicodeEncodeError, OverflowError) as exc:
        raise InvalidRecordError(f"record cannot be encoded: {exc}") from exc


def _encode(
    records: Sequence[RecordInput], base_timestamp: int | None, now_ms: int
) -> EncodedRecords:
    if not records:
        base = -1 if base_timestamp is None else base_timestamp
        return EncodedRecords(b"", 0, 0, base, base)
    if base_timestamp is None:
        first = records[0].timestamp
        base_timestamp = now_ms if first is None else first
    base = base_timestamp
    small = SMALL_LIMIT
    varint_of = VARINT_OF
    parts: list[bytes] = []
    extend = parts.extend
    prev = -1
    max_ts = -(1 << 63)
    for key, value, headers, ts, delta in records:
        if ts is None:
            ts = now_ms
        if ts > max_ts:
            max_ts = ts
        if delta is None:
            delta = prev + 1
        elif delta <= prev:
            raise InvalidRecordError(
                f"offset delta {delta} does not increase (previous record had {prev})"
            )
        prev = delta
        d = ts - base
        ts_var = varint_of[d] if 0 <= d < small else encode_varlong(d)
        delta_var = varint_of[delta] if delta < small else encode_varint(delta)
        if key is None:
            key_var = _NULL
            key = b""
        else:
            n = len(key)
            key_var = varint_of[n] if n < small else encode_varint(n)
        if value is None:
            value_var = _NULL
            value = b""
        else:
            n = len(value)
            value_var = varint_of[n] if n < small else encode_varint(n)
        headers_raw = _encode_headers(headers) if headers else _ZERO
        size = (
            1
            + len(ts_var)
            + len(delta_var)
            + len(key_var)
            + len(key)
            + len(value_var)
            + len(value)
            + len(headers_raw)
        )
        extend(
            (
                varint_of[size] if size < small else encode_varint(size),
                _ZERO,
                ts_var,
                delta_var,
                key_var,
                key,
                value_var,
                value,
                headers_raw,
            )
        )
    return EncodedRecords(b"".join(parts), len(records), prev, base, max_ts)


def encode_record_body(key: bytes | None, value: bytes | None, headers: Headers = ()) -> bytes:
    """The record's bytes from keyLength to its end: key, value and headers (see the module
    docstring). Raises ``InvalidRecordError`` for a header key that is not UTF-8."""
    small = SMALL_LIMIT
    if key is None:
        key_var = _NULL
        key = b""
    else:
        n = len(key)
        key_var = VARINT_OF[n] if n < small else encode_varint(n)
    if value is None:
        value_var = _NULL
        value = b""
    else:
        n = len(value)
        value_var = VARINT_OF[n] if n < small else encode_varint(n)
    try:
        headers_raw = _encode_headers(headers) if headers else _ZERO
    except (ValueError, UnicodeEncodeError) as exc:
        raise InvalidRecordError(f"record cannot be encoded: {exc}") from exc
    return b"".join((key_var, key, value_var, value, headers_raw))


def encode_bodies(
    bodies: Sequence[bytes], timestamps: Sequence[int], base_timestamp: int | None = None
) -> EncodedRecords:
    """The records section of the records whose bodies (``encode_record_body``) and timestamps
    are given, at offset deltas 0, 1, 2 ...; ``base_timestamp`` as for ``encode_records``.
    Raises ``InvalidRecordError`` for a timestamp delta out of the int64 range."""
    count = len(bodies)
    if count != len(timestamps):
        raise ValueError(f"{count} bodies and {len(timestamps)} timestamps")
    if not count:
        base = -1 if base_timestamp is None else base_timestamp
        return EncodedRecords(b"", 0, 0, base, base)
    base = timestamps[0] if base_timestamp is None else base_timestamp
    small = SMALL_LIMIT
    varint_of = VARINT_OF
    parts: list[bytes] = []
    extend = parts.extend
    delta = 0
    try:
        for body, ts in zip(bodies, timestamps, strict=True):
            d = ts - base
            ts_var = varint_of[d] if 0 <= d < small else encode_varlong(d)
            delta_var = varint_of[delta] if delta < small else encode_varint(delta)
            size = 1 + len(ts_var) + len(delta_var) + len(body)
            extend((varint_of[size] if size < small else encode_varint(size), _ZERO))
            extend((ts_var, delta_var, body))
            delta += 1
    except (ValueError, OverflowError) as exc:
        raise InvalidRecordError(f"record cannot be encoded: {exc}") from exc
    return EncodedRecords(b"".join(parts), count, count - 1, base, max(timestamps))
