"""The records a member acquired, out of a ShareFetch answer's record batches (pure).

A leader answers a ShareFetch with whole batches (``ShareFetchedPartition.records``, the bytes
as its log stores them) and the offset ranges of those batches the member now holds
(``acquired``, each with its delivery count). Records of the batches outside the ranges belong
to other members or are done: they are never decoded or handed out. A batch that holds no
acquired offset is stepped over on its header alone (no checksum, no decompression); control
batches are skipped as Kafka's consumers skip them. Ranges may come in any order and may
overlap no batch (a record compacted away): such offsets are simply absent from the result.

Pure functions of their arguments; safe from any thread.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import NamedTuple

from yak.protocol.broker_wire import Buffer
from yak.protocol.kafka_share import AcquiredRecords
from yak.record import Record, decode_batch
from yak.record.batch_header import iter_batches

__all__ = ["AcquiredPartition", "acquired_records"]


class AcquiredPartition(NamedTuple):
    """One partition's acquired records in offset order, each with its delivery count."""

    topic: str
    partition: int
    records: list[Record]
    delivery_counts: list[int]


def acquired_records(
    topic: str, partition: int, data: Buffer, ranges: Sequence[AcquiredRecords]
) -> AcquiredPartition:
    """The records of ``data`` whose offsets lie in ``ranges`` (see the module docstring).
    Bad framing or a bad checksum raises ``CorruptRecordError``: never a wrong record."""
    spans = sorted(ranges)
    firsts = [span.first_offset for span in spans]
    records: list[Record] = []
    counts: list[int] = []
    if not spans or not len(memoryview(data)):
        return AcquiredPartition(topic, partition, records, counts)
    lowest, highest = firsts[0], spans[-1].last_offset
    for position, header in iter_batches(data, check_crc=False):
        last = header.base_offset + header.last_offset_delta
        if (
            header.is_control
            or last < lowest
            or not _overlaps(spans, firsts, header.base_offset, last)
        ):
            continue
        batch = decode_batch(
            data, position, from_offset=max(lowest, header.base_offset), until_offset=highest
        )
        for record in batch.records:
            count = _count_of(spans, firsts, record.offset)
            if count is not None:
                records.append(record)
                counts.append(count)
    return AcquiredPartition(topic, partition, records, counts)


def _span_at(spans: Sequence[AcquiredRecords], firsts: list[int], offset: int) -> int:
    """The index of the last span starting at or below ``offset`` (-1: none)."""
    return bisect.bisect_right(firsts, offset) - 1


def _overlaps(spans: Sequence[AcquiredRecords], firsts: list[int], first: int, last: int) -> bool:
    """Whether a span meets ``first..last`` (spans do not overlap each other: the last one
    starting at or below ``last`` is the only candidate)."""
    index = _span_at(spans, firsts, last)
    return index >= 0 and spans[index].last_offset >= first


def _count_of(spans: Sequence[AcquiredRecords], firsts: list[int], offset: int) -> int | None:
    index = _span_at(spans, firsts, offset)
    if index >= 0 and spans[index].last_offset >= offset:
        return spans[index].delivery_count
    return None
