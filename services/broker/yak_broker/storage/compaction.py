"""One compaction pass over a partition log: choose what is cleanable, run the ``Cleaner``,
swap the result in (the body of Kafka's cleaner thread for one log).

Cleanable: the closed segments from the log start up to the first segment that is active,
reaches above the high watermark, or holds records newer than ``min.compaction.lag.ms``. A
pass runs when the dirty part (segments from the cleaner's checkpoint on) is at least
``min.cleanable.dirty.ratio`` of the cleanable bytes, or when the oldest dirty record is older
than ``max.compaction.lag.ms``. The checkpoint (first dirty offset) lives in memory, in the
``Compactor``: after a restart the next pass re-reads from the log start, which costs time but
never correctness.

Crash safety is the cleaner's (``.cleaned`` → ``.swap`` → swap, finished or undone by the log
loader). Runs on the log's owner (event loop) between appends: ``LogManager`` calls it as its
``cleaner`` callback; the file rewriting can be moved to a thread by a caller that stops
appends to the partition meanwhile.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from yak.clock import Clock
from yak_broker.storage.log import Log
from yak_broker.storage.log_cleaner import Cleaner, CleanerConfig, CleanResult

__all__ = ["Compactor", "cleanable_bases", "compact"]


def cleanable_bases(log: Log, now_ms: int) -> tuple[list[int], int]:
    """``(bases, end_offset)``: the closed segments a pass may rewrite, and where they end."""
    segments = log.segments
    bases: list[int] = []
    end = segments[0].base_offset
    lag = log.config.min_compaction_lag_ms
    for segment, upper in itertools.pairwise(segments):
        if upper.base_offset > log.high_watermark or now_ms - segment.max_timestamp < lag:
            break
        bases.append(segment.base_offset)
        end = upper.base_offset
    return bases, end


def compact(log: Log, now_ms: int, first_dirty_offset: int | None = None) -> CleanResult | None:
    """Clean ``log`` if its dirty ratio (or max lag) asks for it; return what was done."""
    if not log.config.compact:
        return None
    bases, end = cleanable_bases(log, now_ms)
    if not bases:
        return None
    dirty_from = log.log_start_offset if first_dirty_offset is None else first_dirty_offset
    sizes = {segment.base_offset: segment for segment in log.segments}
    total = sum(sizes[base].size for base in bases)
    dirty = [sizes[base] for base in bases if sizes[base].next_offset > dirty_from]
    dirty_bytes = sum(segment.size for segment in dirty)
    overdue = any(now_ms - s.max_timestamp > log.config.max_compaction_lag_ms for s in dirty)
    if not dirty or (
        total and dirty_bytes / total < log.config.min_cleanable_dirty_ratio and not overdue
    ):
        return None
    cleaner = Cleaner(
        CleanerConfig(
            delete_retention_ms=log.config.delete_retention_ms,
            max_segment_bytes=log.config.segment_bytes,
        )
    )
    result = cleaner.clean(
        log.directory,
        bases,
        end,
        dirty_from,
        log.producers.last_batch_offsets(),
        now_ms,
        complete=False,
    )
    for plan in result.swaps:
        log.replace_segments(plan.base_offset, plan.replaced_bases)
    return result


class Compactor:
    """``LogManager``'s cleaner callback: ``compact`` per log, remembering each checkpoint."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.checkpoints: dict[Path, int] = {}

    async def __call__(self, log: Log) -> None:
        checkpoint = self.checkpoints.get(log.directory)
        if checkpoint is not None and checkpoint < log.log_start_offset:
            checkpoint = None
        result = compact(log, self._clock.time_ms(), checkpoint)
        if result is not None:
            self.checkpoints[log.directory] = result.first_dirty_offset
