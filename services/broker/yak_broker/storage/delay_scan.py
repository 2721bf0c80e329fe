"""Find the delayed records and the cancels in bytes read from a partition's log.

Input: whole RecordBatch v2 batches back to back, as ``Log.read`` returns them
(``FetchDataInfo.records``), and ``from_offset``, the delay index's cursor: the first batch of a
read may start below it, and records below it were indexed already, so they are left out.
Output: ``DelayScan``, the ``(deliver_at, offset)`` of every record at or above
``from_offset`` that carries a well-formed ``yak-deliver-at`` header (``yak.delays``'s
tolerant reading: a malformed header is not a delay), in offset order as two ``array('q')``;
the cancel control records found (``Cancellation``: the cancel's own offset, the cancelled
record's offset and due time); and ``next_offset``, the offset after the last batch scanned
(the index's new cursor when the caller has no better one).

Cost: a batch is decoded only if it can hold something. A control batch with the
transactional bit is a transaction marker: skipped on its header. A data batch whose records
section (decompressed if it has a codec) does not contain the bytes ``yak-deliver-at`` cannot
carry the header: skipped after one substring search, without decoding a record. Only batches
that mention the header (and the rare non-transactional control batches) are decoded.

A damaged Yak cancel record (``decode_cancel`` raising) is counted in ``skipped_cancels`` and
left out rather than failing the whole index: it is written by the broker only, so this means
disk damage that the log's own CRC check would have caught on recovery.

Pure functions over bytes; safe from any thread.
"""

from __future__ import annotations

import re
from array import array
from typing import NamedTuple

from yak.delays import DELIVER_AT_HEADER, decode_cancel, deliver_at_of
from yak.errors import InvalidRecordError
from yak.record.batch import decode_batch
from yak.record.batch_header import RECORD_BATCH_OVERHEAD, BatchHeader, Buffer, validate_batch
from yak.record.compression import codec_for

__all__ = ["Cancellation", "DelayScan", "scan_delays"]

#: Searched in place (``re`` reads a memoryview without copying it).
_NEEDLE = re.compile(re.escape(DELIVER_AT_HEADER.encode("ascii")))


class Cancellation(NamedTuple):
    """The cancel at log offset ``at_offset`` of the record ``offset``, due at ``deliver_at``."""

    at_offset: int
    offset: int
    deliver_at: int


class DelayScan(NamedTuple):
    """What one read of the log holds for the delay index (see the module docstring)."""

    deliver_at: array[int]
    offsets: array[int]
    cancels: tuple[Cancellation, ...]
    next_offset: int | None
    skipped_cancels: int = 0


def _may_carry_header(view: memoryview, pos: int, header: BatchHeader) -> bool:
    body = view[pos + RECORD_BATCH_OVERHEAD : pos + header.size]
    if header.compression:
        body = memoryview(codec_for(header.compression).decompress(body))
    return _NEEDLE.search(body) is not None


def scan_delays(records: Buffer, from_offset: int = 0) -> DelayScan:
    """Every delayed record and cancel at or above ``from_offset`` in ``records``."""
    view = memoryview(records)
    deliver_at: array[int] = array("q")
    offsets: array[int] = array("q")
    cancels: list[Cancellation] = []
    skipped = 0
    next_offset: int | None = None
    pos = 0
    while pos < len(view):
        header = validate_batch(view, pos, check_crc=False)  # framing only; decoding checks CRC
        next_offset = header.next_offset
        if header.next_offset <= from_offset or header.record_count == 0:
            pass  # indexed already, or emptied by compaction
        elif header.is_control:
            if not header.is_transactional:  # transactional control batches are txn markers
                skipped += _scan_control(view, pos, from_offset, cancels)
        elif _may_carry_header(view, pos, header):
            for record in decode_batch(view, pos, from_offset=from_offset).records:
                due = deliver_at_of(record.headers)
                if due is not None:
                    deliver_at.append(due)
                    offsets.append(record.offset)
        pos += header.size
    return DelayScan(deliver_at, offsets, tuple(cancels), next_offset, skipped)


def _scan_control(view: memoryview, pos: int, from_offset: int, out: list[Cancellation]) -> int:
    """Append the cancels of the control batch at ``pos``; return how many were damaged."""
    damaged = 0
    for record in decode_batch(view, pos, from_offset=from_offset).records:
        try:
            cancel = decode_cancel(record.key, record.value)
        except InvalidRecordError:
            damaged += 1
            continue
        if cancel is not None:
            out.append(Cancellation(record.offset, cancel.offset, cancel.deliver_at_ms))
    return damaged
