"""Which old segments retention may delete (Kafka ``UnifiedLog.deleteOldSegments``).

Three passes, in Kafka's order, each walking from the oldest segment and stopping at the first
one that fails its test:

1. log-start-offset breach: the segment lies wholly below the log start offset (moved by
   delete-records or an earlier pass);
2. size (``retention.bytes`` >= 0, ``cleanup.policy`` with ``delete``): while the log minus the
   segment is still at least ``retention.bytes``;
3. time (``retention.ms`` >= 0, ``delete`` policy): ``now - largest timestamp > retention.ms``,
   where the largest timestamp is the segment's max record timestamp.

Never deleted: the active (last) segment, and any segment whose upper bound (the next
segment's base offset) is above the high watermark, so unreplicated data stays.

A pure function over segment summaries: no I/O, no state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from yak_broker.storage.log_config import LogConfig

__all__ = ["SegmentSummary", "deletable_segments"]


class SegmentSummary(NamedTuple):
    """What retention needs to know of one segment."""

    base_offset: int
    size: int
    largest_timestamp: int


def deletable_segments(
    segments: Sequence[SegmentSummary],
    config: LogConfig,
    now_ms: int,
    log_start_offset: int,
    high_watermark: int,
) -> int:
    """How many of the oldest ``segments`` to delete (the active one never counts)."""
    total = sum(segment.size for segment in segments)
    count = 0

    def eligible(i: int) -> bool:
        # The upper bound of segment i is the base offset of segment i + 1 (never the active).
        return i + 1 < len(segments) and segments[i + 1].base_offset <= high_watermark

    while eligible(count) and segments[count + 1].base_offset <= log_start_offset:
        total -= segments[count].size
        count += 1
    if not config.delete:
        return count
    if config.retention_bytes >= 0:
        while eligible(count) and total - segments[count].size >= config.retention_bytes:
            total -= segments[count].size
            count += 1
    if config.retention_ms >= 0:
        while eligible(count) and now_ms - segments[count].largest_timestamp > config.retention_ms:
            count += 1
    return count
