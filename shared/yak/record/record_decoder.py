"""Decoding the records section of a RecordBatch v2 into ``Record`` values.

Layout of each record: see ``yak.record.record``. The input is the uncompressed section
(``data[pos:end]``) and the header fields the records are relative to.

Checks, each raising a typed error and never returning a wrong record:

* ``CorruptRecordError``: a varint longer than its type allows or running past ``end``; a
  length below -1; a record whose fields do not end exactly where its length says; fewer or
  more records than the header's count; bytes left over after the last record.
* ``InvalidRecordError``: the framing is sound but the content is impossible — offset deltas
  that do not strictly increase or exceed lastOffsetDelta, a header key that is not UTF-8.

Speed: one loop with the one- and two-byte varint cases inlined (``ZIGZAG_DECODE`` maps the
unsigned value straight to the signed one); longer varints and headers take a function call.
Bounds are checked once per record (its end against ``end``) and out-of-range indexing is
turned into ``CorruptRecordError``. Pure function; safe from any thread.
"""

from __future__ import annotations

from yak.errors import CorruptRecordError, InvalidRecordError
from yak.record.record import Header, Headers, Record
from yak.record.varint import ZIGZAG_DECODE, decode_varint, decode_varlong

__all__ = ["decode_records"]

_EMPTY: Headers = ()
_new = tuple.__new__  # Record(...) without NamedTuple.__new__'s Python-level frame


def _read_bytes(data: bytes, pos: int, what: str) -> tuple[bytes | None, int]:
    """A nullable length-prefixed byte string (the slow path: long or negative length)."""
    n, pos = decode_varint(data, pos)
    if n < 0:
        if n != -1:
            raise CorruptRecordError(f"{what} length {n} at position {pos} is negative")
        return None, pos
    if pos + n > len(data):
        raise CorruptRecordError(f"{what} of {n} bytes at position {pos} runs past the end")
    return data[pos : pos + n], pos + n


def _read_headers(data: bytes, pos: int) -> tuple[Headers, int]:
    count, pos = decode_varint(data, pos)
    if count < 0:
        raise CorruptRecordError(f"record header count {count} is negative")
    headers: list[Header] = []
    for _ in range(count):
        raw_key, pos = _read_bytes(data, pos, "header key")
        if raw_key is None:
            raise CorruptRecordError("record header key is null")
        try:
            key = raw_key.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRecordError(f"record header key is not UTF-8: {exc}") from exc
        value, pos = _read_bytes(data, pos, "header value")
        headers.append((key, value))
    return tuple(headers), pos


_NOTHING_BELOW = -(1 << 64)
#: Above every int64 offset: nothing is skipped at the top unless a reader asks.
_NOTHING_ABOVE = 1 << 64


def decode_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    last_offset_delta: int,
    log_append_time: int | None = None,
    from_offset: int = 0,
    until_offset: int | None = None,
) -> list[Record]:
    """Decode exactly ``count`` records from ``data[pos:end]``.

    Timestamps are ``base_timestamp + timestampDelta``, or ``log_append_time`` for every record
    when it is given (batches with the LogAppendTime type). Records below ``from_offset`` are
    stepped over (length, attributes, timestamp and offset deltas read; key, value and headers
    not) and left out: a reader that wants the tail of a large batch pays for the tail. Records
    above ``until_offset`` likewise (a share group's member holds a few records of a batch).
    Every record's framing is still checked.
    """
    try:
        # Below every int64 offset: nothing is skipped, whatever a (damaged) base offset says.
        skip_below = from_offset if from_offset > 0 else _NOTHING_BELOW
        skip_above = _NOTHING_ABOVE if until_offset is None else until_offset
        records, pos = _decode(
            data,
            pos,
            end,
            count,
            base_offset,
            base_timestamp,
            log_append_time,
            skip_below,
            skip_above,
        )
    except IndexError as exc:
        raise CorruptRecordError("record runs past the end of the batch") from exc
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the last of {count} records")
    if records and records[-1].offset - base_offset > last_offset_delta:
        raise InvalidRecordError(
            f"record offset delta {records[-1].offset - base_offset} exceeds the batch's "
            f"last offset delta {last_offset_delta}"
        )
    return records


def _decode(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    skip_below: int,
    skip_above: int,
) -> tuple[list[Record], int]:
    # One long loop on purpose: in CPython a function call per field would cost more than
    # the field itself. Each varint is read inline: one byte (b < 0x80), two bytes, else the
    # general decoder. Only the record's end is bounds-checked; fields that overrun it are caught by
    # the `pos != record_end` check, and reads past the buffer by the caller's IndexError.
    zz = ZIGZAG_DECODE
    records: list[Record] = []
    append = records.append
    prev = -1
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            length = zz[b]
            pos += 1
        elif (c := data[pos + 1]) < 0x80:
            length = zz[(b & 0x7F) | (c << 7)]
            pos += 2
        else:
            length, pos = decode_varint(data, pos)
        record_end = pos + length
        if length < 0 or record_end > end:
            raise CorruptRecordError(f"record length {length} at position {pos} overruns the batch")
        pos += 1  # attributes: an int8 that Kafka leaves unused
        b = data[pos]
        if b < 0x80:
            ts_delta = zz[b]
            pos += 1
        elif (c := data[pos + 1]) < 0x80:
            ts_delta = zz[(b & 0x7F) | (c << 7)]
            pos += 2
        else:
            ts_delta, pos = decode_varlong(data, pos)
        b = data[pos]
        if b < 0x80:
            delta = zz[b]
            pos += 1
        elif (c := data[pos + 1]) < 0x80:
            delta = zz[(b & 0x7F) | (c << 7)]
            pos += 2
        else:
            delta, pos = decode_varint(data, pos)
        if delta <= prev:
            raise InvalidRecordError(f"offset delta {delta} does not increase (previous {prev})")
        prev = delta
        if base_offset + delta < skip_below or base_offset + delta > skip_above:
            pos = record_end  # outside what the reader wants: not decoded
            continue
        b = data[pos]
        if b < 0x80 and not b & 1:
            n = b >> 1  # one byte, even: a short non-null key (the common case)
            key: bytes | None = data[pos + 1 : pos + 1 + n]
            pos += 1 + n
        elif b == 1:  # zig-zag -1: a null key (the other common case)
            key = None
            pos += 1
        else:
            key, pos = _read_bytes(data, pos, "key")
        b = data[pos]
        if b < 0x80:
            n = zz[b]
            pos += 1
        elif (c := data[pos + 1]) < 0x80:
            n = zz[(b & 0x7F) | (c << 7)]
            pos += 2
        else:
            n, pos = decode_varint(data, pos)
        if n >= 0:
            value: bytes | None = data[pos : pos + n]
            pos += n
        elif n == -1:
            value = None
        else:
            raise CorruptRecordError(f"value length {n} at position {pos} is negative")
        if data[pos] == 0:
            headers = _EMPTY
            pos += 1
        else:
            headers, pos = _read_headers(data, pos)
        if pos != record_end:
            raise CorruptRecordError(f"record fields end at {pos}, its length says {record_end}")
        ts = base_timestamp + ts_delta if log_append_time is None else log_append_time
        append(_new(Record, (base_offset + delta, ts, key, value, headers)))
    return records, pos
