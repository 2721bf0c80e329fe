"""The share-partition snapshot: one record value of ``__yak_share_state`` per share-partition
(docs/decisions.md, "Share groups: where their state lives").

Version 1, big-endian, every integer signed unless marked u:

    offset  size  field
    0       2     magic b"YS"
    2       1     version (u8) = 1
    3       4     leader epoch of the writer (i32)
    7       8     origin offset: where the share-partition began (i64)
    15      8     start offset, SPSO (i64)
    23      8     scan offset, SPEO (i64)
    31      8     delay watermark: due time, ms (i64)
    39      8     delay watermark: offset, 2**63-1 for "all due at that time" (i64)
    47      2     M, member ids in the table (u16)
    49      4     R, runs (u32)
    53      ...   M member ids: length (u16) then that many bytes of UTF-8
    ...     33*R  R runs, in offset order, not overlapping:
                    +0  8  first offset (i64)
                    +8  4  length: the run covers first .. first + length - 1 (u32, >= 1)
                    +12 1  state (u8, Kafka's RecordState: 0 available, 1 acquired,
                           2 acknowledged, 4 archived)
                    +13 1  delivery count (u8)
                    +14 1  dead-letter reason (u8: 0 none, 1 rejected, 2 max delivery
                           attempts; not 0 for archived runs only)
                    +15 2  member: index in the table (u16), 0xFFFF unless acquired
                    +17 8  lock deadline, ms (i64), 0 unless acquired
                    +25 8  the run's oldest record timestamp, ms (i64)
    end-4   4     CRC-32 (zlib's) of every byte before it (u32)

A window of one acknowledged run and one acquired run per member is ~60 bytes plus 33 per run
plus the member ids: a few hundred bytes. Offsets between runs are complete (or delayed and
owed by the delay index). Timestamps are kept per run (its oldest), so a restored machine
reports ages no younger than the original did; every other field is exact.

``decode_snapshot`` checks the magic, the version, the CRC, every length and every field's
consistency, and raises ``CorruptShareStateError`` — never returns a partial state. Pure
functions; safe from any thread.
"""

from __future__ import annotations

import struct
import zlib

from yak.errors import CorruptShareStateError
from yak_broker.share.state.records import (
    DeadLetterReason,
    DelayWatermark,
    RecordState,
    Run,
    ShareSnapshot,
)

__all__ = ["VERSION", "decode_snapshot", "encode_snapshot"]

MAGIC = b"YS"
VERSION = 1
_PREFIX = struct.Struct(">2sB")
_HEADER = struct.Struct(">iqqqqqHI")
_LENGTH = struct.Struct(">H")
_RUN = struct.Struct(">qIBBBHqq")
_CRC = struct.Struct(">I")
_NO_MEMBER = 0xFFFF
_STATES = frozenset(RecordState)
_REASONS = frozenset(DeadLetterReason)


def encode_snapshot(snapshot: ShareSnapshot) -> bytes:
    """The bytes of ``snapshot`` (layout in the module doc)."""
    table: dict[str, int] = {}
    for run in snapshot.runs:
        if run.member_id is not None:
            table.setdefault(run.member_id, len(table))
    if len(table) >= _NO_MEMBER:
        raise ValueError(f"{len(table)} members hold records: at most {_NO_MEMBER - 1}")
    mark = snapshot.delay_watermark
    parts = [
        _PREFIX.pack(MAGIC, VERSION),
        _HEADER.pack(
            snapshot.leader_epoch,
            snapshot.origin_offset,
            snapshot.start_offset,
            snapshot.scan_offset,
            mark.deliver_at_ms,
            mark.offset,
            len(table),
            len(snapshot.runs),
        ),
    ]
    for member_id in table:
        raw = member_id.encode()
        parts += (_LENGTH.pack(len(raw)), raw)
    for run in snapshot.runs:
        member = _NO_MEMBER if run.member_id is None else table[run.member_id]
        parts.append(
            _RUN.pack(
                run.first_offset,
                run.last_offset - run.first_offset + 1,
                run.state,
                run.delivery_count,
                run.reason,
                member,
                run.deadline_ms,
                run.timestamp_ms,
            )
        )
    body = b"".join(parts)
    return body + _CRC.pack(zlib.crc32(body))


def decode_snapshot(data: bytes) -> ShareSnapshot:
    """The snapshot in ``data``; ``CorruptShareStateError`` if anything is wrong with it."""
    view = memoryview(data)
    if len(view) < _PREFIX.size + _HEADER.size + _CRC.size:
        raise CorruptShareStateError(f"share state truncated: {len(view)} bytes")
    magic, version = _PREFIX.unpack_from(view)
    if magic != MAGIC:
        raise CorruptShareStateError(f"not a share state: magic {bytes(magic)!r}")
    if version != VERSION:
        raise CorruptShareStateError(f"share state version {version} is unknown (1 is known)")
    (crc,) = _CRC.unpack_from(view, len(view) - _CRC.size)
    if zlib.crc32(view[: -_CRC.size]) != crc:
        raise CorruptShareStateError("share state fails its CRC")
    try:
        return _parse(view[: -_CRC.size])
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptShareStateError(f"share state malformed: {exc}") from exc


def _parse(body: memoryview) -> ShareSnapshot:
    fields = _HEADER.unpack_from(body, _PREFIX.size)
    epoch, origin, start, scan, mark_ms, mark_offset, members, runs = fields
    if not 0 <= origin <= start <= scan or mark_offset < 0:
        raise CorruptShareStateError(
            f"share state offsets inconsistent: origin {origin}, start {start}, scan {scan}, "
            f"delay watermark offset {mark_offset}"
        )
    at = _PREFIX.size + _HEADER.size
    table: list[str] = []
    for _ in range(members):
        (length,) = _LENGTH.unpack_from(body, at)
        at += _LENGTH.size
        if at + length > len(body):
            raise CorruptShareStateError("share state truncated in its member table")
        table.append(str(body[at : at + length], "utf-8"))
        at += length
    if len(body) - at != runs * _RUN.size:
        raise CorruptShareStateError(
            f"share state holds {len(body) - at} bytes for {runs} runs of {_RUN.size}"
        )
    decoded: list[Run] = []
    previous_last = origin - 1
    for _ in range(runs):
        run = _run(_RUN.unpack_from(body, at), table)
        at += _RUN.size
        if run.first_offset <= previous_last or run.last_offset >= scan:
            raise CorruptShareStateError(
                f"share state run {run.first_offset}-{run.last_offset} overlaps, is out of "
                f"order or lies outside {origin}-{scan - 1}"
            )
        previous_last = run.last_offset
        decoded.append(run)
    return ShareSnapshot(
        leader_epoch=epoch,
        origin_offset=origin,
        start_offset=start,
        scan_offset=scan,
        delay_watermark=DelayWatermark(mark_ms, mark_offset),
        runs=tuple(decoded),
    )


def _run(fields: tuple[int, ...], table: list[str]) -> Run:
    first, length, state, count, reason, member, deadline, timestamp = fields
    where = f"share state run at {first}"
    if length < 1 or state not in _STATES or reason not in _REASONS:
        raise CorruptShareStateError(f"{where}: length {length}, state {state}, reason {reason}")
    acquired = state == RecordState.ACQUIRED
    if acquired != (member != _NO_MEMBER) or (not acquired and deadline != 0):
        raise CorruptShareStateError(f"{where}: member {member}, deadline {deadline}, {state}")
    if acquired and member >= len(table):
        raise CorruptShareStateError(f"{where}: member {member} of {len(table)}")
    if reason and state != RecordState.ARCHIVED:
        raise CorruptShareStateError(f"{where}: a dead-letter reason on state {state}")
    if count == 0 and state != RecordState.AVAILABLE:
        raise CorruptShareStateError(f"{where}: state {state} but never delivered")
    return Run(
        first,
        first + length - 1,
        RecordState(state),
        count,
        table[member] if acquired else None,
        deadline,
        DeadLetterReason(reason),
        timestamp,
    )
