"""A partition log's state and how it reaches the disk: the base of ``log.Log``.

What ``log_loader`` loaded (segments, log start offset, recovery point, high watermark, leader
epoch cache, producer state), the offsets read from it, and durability: ``flush`` and its
off-thread form (``prepare_flush`` then ``mark_flushed``) move the recovery point, and
``write_checkpoint`` persists recovery point, log start offset and high watermark. Apart from
``log`` because this part never changes the data (appends, reads, truncation and retention are
``Log``'s); ``Log`` extends this class, so these are the log's own methods (no indirection).

Dirty tracking (issue 19): a broker holds thousands of logs, almost all idle, so its periodic
work visits only the logs that changed. The owner (``LogManager``) sets two hooks, each called
with no arguments on the owner's thread:

- ``on_unflushed``, when the log goes from fully flushed (recovery point at the LEO) to holding
  unflushed data: an append (leader or follower) to a flushed log, or a truncation that restarts
  the log above its recovery point (``truncate_fully_and_start_at``). It may also be called when
  the log already held unflushed data; never is it missed when it did not;
- ``on_checkpoint_stale``, when the recovery point, log start offset or high watermark moves
  away from what the checkpoint file holds (``checkpoint_stale`` goes from False to True).
  Truncation and a log start offset move write the checkpoint at once; should that write fail,
  the owner's periodic pass retries it.

Files: the segments' files are opened on demand through a ``FileHandleCache`` (the
``LogManager``'s, shared by every log of the broker; a log opened alone gets its own).

Crash behaviour: ``close`` flushes, snapshots the producer state and writes the checkpoint
before the clean-shutdown marker (``log_loader``), so the marker never promises what is not on
disk. Thread-safety: as ``Log``'s (single writer; only ``prepare_flush``'s descriptors may be
fsynced on another thread).
"""

from __future__ import annotations

import bisect
import random
import shutil
from collections.abc import Callable
from pathlib import Path

from yak.clock import Clock
from yak.record.batch_header import BatchHeader
from yak_broker.storage import checkpoint
from yak_broker.storage.checkpoint import PartitionCheckpoint, write_atomically
from yak_broker.storage.file_handles import FileHandleCache
from yak_broker.storage.leader_epoch_cache import LeaderEpochCache
from yak_broker.storage.log_config import LogConfig
from yak_broker.storage.log_info import FlushTicket
from yak_broker.storage.log_loader import CLEAN_SHUTDOWN_FILE, LoadedLog, load_log
from yak_broker.storage.producer_state import ProducerStateManager
from yak_broker.storage.segment import LogSegment, sync_and_close

__all__ = ["LogDurability"]


class LogDurability:
    """A partition log's state, offsets, flushes, checkpoint and close (see the module doc);
    ``Log`` is the class to use."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        clock: Clock,
        files: FileHandleCache | None = None,
        loaded: LoadedLog | None = None,
    ) -> None:
        self.directory = directory
        self.config = config
        self._clock = clock
        self._files = files if files is not None else FileHandleCache()
        if loaded is None:
            loaded = load_log(directory, config, clock.time_ms(), self._files)
        self._segments: list[LogSegment] = loaded.segments
        self._bases = [segment.base_offset for segment in self._segments]
        self._log_start_offset = loaded.log_start_offset
        self._recovery_point = loaded.recovery_point
        self._high_watermark = loaded.high_watermark
        self.leader_epochs: LeaderEpochCache = loaded.leader_epochs
        self.producers: ProducerStateManager = loaded.producers
        self.had_clean_shutdown = loaded.clean_shutdown
        self.recovered_truncated_bytes = loaded.truncated_bytes
        self._unflushed_messages = 0
        self._last_flush_ms = clock.time_ms()
        self._jitter_ms = _jitter(config)
        self._generation = 0  # bumped by each truncation; see mark_flushed
        self._producer_end_header: BatchHeader | None = None
        self._index_sync_pending: list[LogSegment] = []  # rolled, indexes not yet fsynced
        self._current_epoch = self.leader_epochs.latest_epoch
        self._closed = False
        #: What the checkpoint file holds, as loaded or last written by ``write_checkpoint``.
        self._checkpointed: PartitionCheckpoint | None = loaded.checkpoint
        self._checkpoint_stale = self._current_checkpoint() != self._checkpointed
        #: The owner's hooks (see the module doc): unflushed data appeared; offsets moved.
        self.on_unflushed: Callable[[], None] | None = None
        self.on_checkpoint_stale: Callable[[], None] | None = None

    # --- offsets -------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def has_unflushed(self) -> bool:
        """Whether some offsets below the LEO are not fsynced yet (recovery point < LEO)."""
        return self._recovery_point < self._segments[-1].next_offset

    @property
    def checkpoint_stale(self) -> bool:
        """Whether the checkpoint file lags the recovery point or the high watermark."""
        return self._checkpoint_stale

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark (replication drives it), clamped to [log start, LEO]."""
        high_watermark = min(max(offset, self._log_start_offset), self.log_end_offset)
        if high_watermark != self._high_watermark:
            self._high_watermark = high_watermark
            self._offsets_moved()
        return high_watermark

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self._jitter_ms = _jitter(config)

    # --- durability ----------------------------------------------------------------------

    def _sync_producer_end(self) -> None:
        header = self._producer_end_header
        if header is not None:
            self.producers.update(header._replace(producer_id=-1), self._clock.time_ms())
            self._producer_end_header = None

    def flush_due(self) -> bool:
        """Whether ``flush.ms`` elapsed with unflushed data, or a rolled segment is unflushed."""
        if self._recovery_point >= self.log_end_offset:
            return False
        if self._recovery_point < self._segments[-1].base_offset:
            return True
        return self._clock.time_ms() - self._last_flush_ms >= self.config.flush_ms

    def flush(self, *, all_indexes: bool = False) -> None:
        """fsync every segment holding offsets at or above the recovery point; advance it."""
        ticket = self.prepare_flush(all_indexes=all_indexes)
        sync_and_close(ticket.fds)
        self.mark_flushed(ticket.target, ticket.generation)

    def prepare_flush(self, *, all_indexes: bool = False) -> FlushTicket:
        """Start a flush off the owner's thread: fsync and close ``fds`` on any thread, then
        call ``mark_flushed(ticket.target, ticket.generation)`` on the owner's thread.

        The active segment's index files are left out unless ``all_indexes``: after a crash
        recovery always rebuilds the active segment's indexes, so syncing them would only
        triple the fsyncs of every group commit. A rolled segment's indexes are synced by the
        first flush after the roll, before the recovery point can pass the segment.
        """
        index = max(bisect.bisect_right(self._bases, self._recovery_point) - 1, 0)
        active = self._segments[-1]
        plan = {segment: all_indexes or segment is not active for segment in self._segments[index:]}
        for segment in self._index_sync_pending:
            plan[segment] = True
        self._index_sync_pending = []
        fds = [fd for seg, indexes in plan.items() if not seg.closed for fd in seg.dup_fds(indexes)]
        return FlushTicket(self.log_end_offset, self._generation, fds)

    def mark_flushed(self, offset: int, generation: int | None = None) -> None:
        """Everything below ``offset`` is on disk: move the recovery point.

        Ignored when the log was truncated since the flush of ``generation`` began (the bytes
        below ``offset`` may since have been replaced by unflushed ones).
        """
        if generation is not None and generation != self._generation:
            return
        offset = min(offset, self.log_end_offset)
        if offset > self._recovery_point:
            self._recovery_point = offset
            self._offsets_moved()
        if offset >= self.log_end_offset:
            self._unflushed_messages = 0
        self._last_flush_ms = self._clock.time_ms()

    def write_checkpoint(self) -> bool:
        """Persist recovery point, log start offset and high watermark atomically — unless
        they are what this process last wrote (an idle partition costs no write); whether it
        wrote."""
        current = self._current_checkpoint()
        if current == self._checkpointed:
            self._checkpoint_stale = False
            return False
        checkpoint.write(self.directory / checkpoint.CHECKPOINT_FILE_NAME, current)
        self._checkpointed = current
        self._checkpoint_stale = False
        return True

    def _current_checkpoint(self) -> PartitionCheckpoint:
        return PartitionCheckpoint(
            self._recovery_point, self._log_start_offset, self._high_watermark
        )

    def _offsets_moved(self) -> None:
        if not self._checkpoint_stale:
            self._checkpoint_stale = True
            if self.on_checkpoint_stale is not None:
                self.on_checkpoint_stale()

    # --- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Clean shutdown: flush, snapshot producer state, checkpoint, then the marker."""
        if self._closed:
            return
        self.flush(all_indexes=True)
        self._sync_producer_end()
        self.producers.take_snapshot()
        self.write_checkpoint()
        for segment in self._segments:
            segment.close()
        write_atomically(self.directory / CLEAN_SHUTDOWN_FILE, b"")
        self._closed = True

    def close_without_marker(self) -> None:
        """Release files as a crash would leave them (tests and aborted loads)."""
        for segment in self._segments:
            segment.close()
        self._closed = True

    def delete(self) -> None:
        """Close and remove the partition's folder."""
        self.close_without_marker()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"Log({self.directory.name!r}, start={self._log_start_offset}, "
            f"hw={self._high_watermark}, end={self.log_end_offset})"
        )


def _jitter(config: LogConfig) -> int:
    if config.segment_jitter_ms <= 0:
        return 0
    return random.randrange(min(config.segment_jitter_ms, config.segment_ms))
