"""Offset arithmetic of the ``yak`` source: ranges, splits, rate limits, data loss (pure).

An ``OffsetRange`` is the half-open ``[start, end)`` of one Yak partition that one Spark task
reads; ``start`` None means "from the log start, whatever it is when read" (a partition the
query had not seen before). Streaming offsets travel through Spark's checkpoint as JSON
``{"topic": {"0": 42}}`` — string partition keys, the next offset to read per partition.

Data loss, as Spark's Kafka source defines it: offsets the query still had to read are gone,
because retention or delete-records moved the log start past them, or the partition now ends
below them (the topic was deleted or re-created). With ``failOnDataLoss`` (the default) the
query fails with ``DataLossError``; without it the missing records are skipped.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from yak.types import TopicPartition

__all__ = [
    "DataLossError",
    "OffsetRange",
    "check_end",
    "check_start",
    "offsets_from_json",
    "offsets_to_json",
    "rate_limit",
    "split_ranges",
]


class DataLossError(RuntimeError):
    """Records a query had to read are gone (see the module docstring)."""


class OffsetRange(NamedTuple):
    topic: str
    partition: int
    #: First offset to read; None: the log start at read time.
    start: int | None
    #: One past the last offset to read.
    end: int

    @property
    def size(self) -> int:
        """Records in the range, counting from 0 when the start is the log start."""
        return max(0, self.end - (self.start or 0))


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{"topic": {"0": 42}}``, topics and partitions in order."""
    doc: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        doc.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return doc


def offsets_from_json(doc: object) -> dict[TopicPartition, int]:
    """The inverse of ``offsets_to_json``; ``ValueError`` for anything else."""
    if not isinstance(doc, dict):
        raise ValueError(f"yak offsets must be a JSON object, not {doc!r}")
    offsets: dict[TopicPartition, int] = {}
    for topic, partitions in doc.items():
        if not isinstance(partitions, dict):
            raise ValueError(f"yak offsets of {topic!r} must be an object, not {partitions!r}")
        for partition, offset in partitions.items():
            if not str(partition).isdigit() or type(offset) is not int or offset < 0:
                raise ValueError(f"yak offset {topic}-{partition}: {offset!r}")
            offsets[TopicPartition(str(topic), int(partition))] = offset
    return offsets


def split_ranges(
    ranges: Iterable[OffsetRange],
    *,
    max_records: int | None = None,
    min_partitions: int | None = None,
) -> list[OffsetRange]:
    """Cut ranges so none holds more than ``max_records`` offsets and there are at least
    ``min_partitions`` of them (large ranges get more pieces, as in Spark's Kafka source).
    Empty ranges are dropped; a range starting at the log start is never cut (its start is
    not known yet)."""
    pieces = [r for r in ranges if r.size > 0 or r.start is None]
    if max_records is not None:
        pieces = [p for r in pieces for p in _cut(r, math.ceil(r.size / max_records))]
    if min_partitions is not None and 0 < len(pieces) < min_partitions:
        total = sum(r.size for r in pieces)
        pieces = [
            p
            for r in pieces
            for p in _cut(r, max(1, round(r.size / total * min_partitions) if total else 1))
        ]
    return pieces


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    if r.start is None or parts <= 1:
        return [r]
    bounds = [r.start + r.size * i // parts for i in range(parts + 1)]
    return [OffsetRange(r.topic, r.partition, a, b) for a, b in itertools.pairwise(bounds)]


def rate_limit(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], limit: int
) -> dict[TopicPartition, int]:
    """End offsets that read at most ``limit`` records in total from ``start``, shared in
    proportion to what each partition has (largest remainders first, ties in partition order).
    Partitions missing from ``start`` start at 0."""
    sizes = {tp: max(0, end[tp] - start.get(tp, 0)) for tp in sorted(end)}
    total = sum(sizes.values())
    if total <= limit:
        return dict(end)
    shares = {tp: size * limit // total for tp, size in sizes.items()}
    left = limit - sum(shares.values())
    by_remainder = sorted(sizes, key=lambda tp: (-(sizes[tp] * limit % total), tp))
    for tp in by_remainder[:left]:
        shares[tp] += 1
    return {tp: start.get(tp, 0) + share if sizes[tp] else end[tp] for tp, share in shares.items()}


def check_start(tp: TopicPartition, wanted: int, log_start: int, *, fail_on_data_loss: bool) -> int:
    """Where to read from when ``wanted`` is the next offset and the log starts at
    ``log_start``: ``wanted`` if still there, else the log start or ``DataLossError``."""
    if wanted >= log_start:
        return wanted
    if fail_on_data_loss:
        raise DataLossError(
            f"{tp}: offsets {wanted} to {log_start - 1} were deleted (retention or "
            f"delete-records) before the query read them; the log now starts at {log_start}. "
            "Set the option failOnDataLoss=false to skip them."
        )
    return log_start


def check_end(
    tp: TopicPartition, offset: int, end: int, high_watermark: int, *, fail_on_data_loss: bool
) -> bool:
    """Whether reading must go on at ``offset`` towards ``end`` (exclusive) when the partition
    ends at ``high_watermark``; ``DataLossError`` if the range reaches past the partition's end
    (its records are gone)."""
    if offset >= end:
        return False
    if offset < high_watermark:
        return True
    if fail_on_data_loss:
        raise DataLossError(
            f"{tp}: the query must read up to offset {end}, but the partition now ends at "
            f"{high_watermark} (deleted, re-created or truncated). "
            "Set the option failOnDataLoss=false to skip the missing offsets."
        )
    return False
