"""Reading the leader's log for a share-partition: the scan that feeds ``SharePartition.admit``
and the read-back of the whole batches an answer carries.

``ShareLog`` is the narrow view of a partition's log the share drivers need (the storage
``Log`` is one; tests use an in-memory log of real RecordBatch bytes). Reads stop at the high
watermark: a share group never sees a record that could still be truncated.

- ``scan`` reads from the machine's ``ReadRequest`` offset, decodes the batches (control
  batches are skipped: their offsets are complete) and returns what ``admit`` needs per record
  — offset, timestamp, the ``yak-deliver-at`` due time (``yak.delays``, only on topics with
  delays enabled) and whether the request's filter accepts it — plus the offset the read
  ended at. With no delays and no filter, a batch whose offsets are all records (no gaps from
  compaction) is not decoded: its records come from its header, each with the batch's first
  timestamp (its append time under ``LogAppendTime``), as one ``LogRange`` that ``admit`` takes
  as one run — the window keeps timestamps only for
  the oldest-unacked age, which may so read a batch's span older. Bounded: at most
  ``max_bytes`` read and ``ReadRequest.max_records`` records taken into the window. A scan
  offset below the log start (retention) skips to the log start.
- ``read_back`` finds the whole batches holding acquired offsets (a record released earlier,
  or a delayed one, lies below the scan offset and is read again). It reports the offsets the
  log no longer has and, with a filter, the ones the filter rejects: the driver accepts those
  on the member's behalf (docs/decisions.md, "Server-side filters").

Pure functions over the log; synchronous (no await between reading and deciding). Not
thread-safe: the event loop that owns the log calls them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple, Protocol

from yak.delays import deliver_at_of
from yak.filters import RecordFilter
from yak.protocol.broker_wire import Buffer
from yak.record import Record, decode_batch
from yak.record.batch_header import BatchHeader, TimestampType, iter_batches
from yak_broker.share.state.records import LogRange, LogRecord, ReadRequest
from yak_broker.storage.log_info import FetchDataInfo

__all__ = ["ReadBack", "ScanResult", "ShareLog", "find_records", "read_back", "scan"]

#: Bytes read from the log per read call (at most).
READ_BYTES = 1024 * 1024
#: The read-back's first read: an answer usually needs a few batches, so it starts small and
#: doubles per further read of the same call, up to ``max_bytes``.
FIRST_READ_BACK_BYTES = 64 * 1024


class ShareLog(Protocol):
    """What the share drivers read of a partition's log (below its high watermark)."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    def read(self, offset: int, max_bytes: int) -> FetchDataInfo: ...


class ScanResult(NamedTuple):
    #: In offset order; a gapless batch read from its header alone is one ``LogRange``.
    records: list[LogRecord | LogRange]
    #: Where the read ended: every offset below it was looked at.
    next_offset: int


class ReadBack(NamedTuple):
    """The batches holding the acquired offsets, in log order, and what could not be given."""

    batches: list[Buffer]
    #: Offsets the log no longer holds (below its start, compacted away).
    missing: list[int]
    #: Offsets the request's filter rejects.
    rejected: list[int]


def _batches(log: ShareLog, offset: int, max_bytes: int) -> Iterator[tuple[BatchHeader, Buffer]]:
    """Whole batches from the one holding ``offset`` up to the high watermark."""
    upper = log.high_watermark
    while offset < upper:
        chunk = _chunk(log, offset, max_bytes)
        if not chunk:
            return
        yield from chunk
        offset = chunk[-1][0].next_offset


def _chunk(log: ShareLog, offset: int, max_bytes: int) -> list[tuple[BatchHeader, Buffer]]:
    """One read: the whole batches from the one holding ``offset`` (empty at the HW)."""
    if offset >= log.high_watermark:
        return []
    view = log.read(offset, max_bytes).records
    return [(h, view[p : p + h.size]) for p, h in iter_batches(view, check_crc=False)]


def _holding(
    log: ShareLog, offsets: Sequence[int], max_bytes: int, missing: list[int]
) -> Iterator[tuple[BatchHeader, Buffer, list[int]]]:
    """Each batch holding some of ``offsets`` (ascending) with those offsets; the offsets no
    batch holds go to ``missing``. One log read per run of nearby offsets, the first of
    ``FIRST_READ_BACK_BYTES``, each next one twice the last, up to ``max_bytes``."""
    i, n = 0, len(offsets)
    size = min(FIRST_READ_BACK_BYTES, max_bytes)
    while i < n:
        if offsets[i] < log.log_start_offset:
            missing.append(offsets[i])
            i += 1
            continue
        before = i
        chunk, size = _chunk(log, offsets[i], size), min(size * 2, max_bytes)
        for header, batch in chunk:
            while i < n and offsets[i] < header.base_offset:
                missing.append(offsets[i])
                i += 1
            held = []
            while i < n and offsets[i] <= header.last_offset:
                held.append(offsets[i])
                i += 1
            if held:
                yield header, batch, held
            if i >= n:
                return
        if i == before:  # at or past the high watermark: not readable
            missing.append(offsets[i])
            i += 1


def scan(
    log: ShareLog,
    request: ReadRequest,
    record_filter: RecordFilter | None,
    *,
    delays: bool,
    max_bytes: int = READ_BYTES,
) -> ScanResult:
    """The records to ``admit`` from ``request.offset`` (see the module doc)."""
    offset = max(request.offset, log.log_start_offset)
    out: list[LogRecord | LogRange] = []
    taken, read = 0, 0
    plain = not delays and record_filter is None
    for header, batch in _batches(log, offset, max_bytes):
        if header.is_control:
            offset = header.next_offset
            continue
        if plain and header.record_count == header.last_offset_delta + 1:
            taken += _from_header(header, offset, out)
        else:
            for record in decode_batch(batch, from_offset=offset).records:
                deliver_at = deliver_at_of(record.headers) if delays else None
                accepted = record_filter is None or record_filter.matches(record)
                out.append(LogRecord(record.offset, record.timestamp, deliver_at, accepted))
                taken += accepted and deliver_at is None
        offset = header.next_offset
        read += header.size
        if taken >= request.max_records or read >= max_bytes:
            break
    return ScanResult(out, max(offset, request.offset))


def _from_header(header: BatchHeader, offset: int, out: list[LogRecord | LogRange]) -> int:
    """The records of a gapless batch from ``offset`` on, from its header alone, as one
    ``LogRange`` (module doc); how many."""
    if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
        stamp = header.max_timestamp
    else:
        stamp = header.base_timestamp
    first = max(offset, header.base_offset)
    out.append(LogRange(first, header.last_offset, stamp))
    return header.next_offset - first


def read_back(
    log: ShareLog,
    offsets: Sequence[int],
    record_filter: RecordFilter | None,
    *,
    max_bytes: int = READ_BYTES,
) -> ReadBack:
    """The whole batches holding ``offsets`` (ascending), see the module doc."""
    batches: list[Buffer] = []
    missing: list[int] = []
    rejected: list[int] = []
    for header, batch, held in _holding(log, offsets, max_bytes, missing):
        if _check(batch, header, held, record_filter, missing, rejected):
            batches.append(batch)
    return ReadBack(batches, missing, rejected)


def _check(
    batch: Buffer,
    header: BatchHeader,
    held: list[int],
    record_filter: RecordFilter | None,
    missing: list[int],
    rejected: list[int],
) -> bool:
    """Sort ``held`` (offsets inside ``batch``'s range) into present, missing and rejected;
    whether any is present and wanted."""
    if header.is_control:
        missing.extend(held)
        return False
    if record_filter is None and header.record_count == header.last_offset_delta + 1:
        return True  # every offset of the range is a record: no need to decode
    records = {r.offset: r for r in decode_batch(batch, from_offset=held[0]).records}
    kept = False
    for offset in held:
        record = records.get(offset)
        if record is None:
            missing.append(offset)
        elif record_filter is not None and not record_filter.matches(record):
            rejected.append(offset)
        else:
            kept = True
    return kept


def find_records(log: ShareLog, offsets: Sequence[int]) -> dict[int, Record]:
    """The records at ``offsets`` (ascending) that the log still holds (dead letters)."""
    found: dict[int, Record] = {}
    for header, batch, held in _holding(log, offsets, READ_BYTES, []):
        if header.is_control:
            continue
        wanted = set(held)
        for record in decode_batch(batch, from_offset=held[0]).records:
            if record.offset in wanted:
                found[record.offset] = record
    return found
