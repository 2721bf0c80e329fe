"""One replica's delay index and what keeps it level with the replica's log.

``PartitionDelays.open`` opens ``<partition dir>/delays`` (``storage.delay_index``), cuts it to
the log (an index cursor above the log end, after a crash that lost the log's unflushed tail,
is truncated to the log end; entries below the log start are dropped) and sets itself as the
log's ``observer``:

- ``appended`` (leader and follower appends alike): the partition asks its owner to index it
  (``wake``); ``index_step`` then reads **up to the log end** (not the high watermark: a
  follower's high watermark trails, and every record above it that goes away goes through
  ``truncated``, which cuts the index with the log), one bounded read per step;
- ``truncated`` → ``DelayIndex.truncate_to`` (and ``drop_below`` for a log restarted higher);
- ``log_start_moved`` (retention, DeleteRecords) → ``DelayIndex.drop_below``;
- ``closed``: a clean close checkpoints the index; otherwise (the log is being deleted) the
  index is dropped as it stands. Either way the partition is done and its owner forgets it.

Checkpoints run off the event loop: ``prepare_checkpoint`` here, ``write_checkpoint`` on a
worker thread (the owner's), then ``checkpoint_done``. Meanwhile ``truncate_to`` and ``close``
may not touch the index (the index's rule): a truncation is noted and applied by
``checkpoint_done`` (until then nothing is indexed and ``covered_offset`` stops at the new log
end), and so is a close.

Single event loop, except the ticket handed to the worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from yak.types import TopicPartition
from yak_broker.storage.delay_index import DELAYS_DIR, DelayCheckpoint, DelayIndex
from yak_broker.storage.delay_scan import scan_delays
from yak_broker.storage.log import FetchIsolation, Log

__all__ = ["DEFAULT_READ_BYTES", "PartitionDelays"]

_log = logging.getLogger(__name__)
#: Bytes of log read per indexing step: bounds the time one step holds the event loop.
DEFAULT_READ_BYTES = 1 << 20


class PartitionDelays:
    """The delay index of the replica ``tp`` and its log (see the module doc)."""

    def __init__(
        self,
        tp: TopicPartition,
        log: Log,
        index: DelayIndex,
        wake: Callable[[PartitionDelays], None],
        now_ms: Callable[[], int],
        read_bytes: int = DEFAULT_READ_BYTES,
        on_done: Callable[[PartitionDelays], None] = lambda _partition: None,
    ) -> None:
        self.tp = tp
        self.log = log
        self.index = index
        self._wake = wake
        self._now_ms = now_ms
        self._read_bytes = read_bytes
        self._on_done = on_done
        self.done = False
        #: A checkpoint ticket is on a worker thread: no truncate_to or close until it returns.
        self.checkpointing = False
        #: Something changed since the last checkpoint.
        self.dirty = False
        self._truncate_to: int | None = None
        self._close_clean: bool | None = None

    @classmethod
    def open(
        cls,
        tp: TopicPartition,
        log: Log,
        wake: Callable[[PartitionDelays], None],
        now_ms: Callable[[], int],
        read_bytes: int = DEFAULT_READ_BYTES,
        on_done: Callable[[PartitionDelays], None] = lambda _partition: None,
    ) -> PartitionDelays:
        """Open the index of ``log`` and observe the log (see the module doc)."""
        index = DelayIndex.open(log.directory / DELAYS_DIR)
        if index.cursor > log.log_end_offset:
            index.truncate_to(log.log_end_offset)
        index.drop_below(log.log_start_offset)
        partition = cls(tp, log, index, wake, now_ms, read_bytes, on_done)
        log.observer = partition
        if partition.lag:
            wake(partition)
        return partition

    # --- what the share-partitions and the listing ask ---------------------------------------

    @property
    def lag(self) -> int:
        """Log offsets not indexed yet."""
        return max(self.log.log_end_offset - self.index.cursor, 0)

    def covered_offset(self) -> int:
        covered = min(self.index.cursor, self.log.log_end_offset)
        return covered if self._truncate_to is None else min(covered, self._truncate_to)

    def index_through(self, offset: int) -> DelayIndex | None:
        """Index the log up to at least ``offset`` now (see ``IndexedPartition``)."""
        if self.done:
            return None
        target = min(offset, self.log.log_end_offset)
        while self.index.cursor < target and self.index_step():
            pass
        return self.index

    def advance(self) -> None:
        if not self.done:
            self.index.advance(self._now_ms())

    # --- indexing --------------------------------------------------------------------------

    def index_step(self) -> bool:
        """Index one bounded read of the log; whether there is more to index."""
        if self.done or self._truncate_to is not None:
            return False
        cursor, end = self.index.cursor, self.log.log_end_offset
        if cursor >= end:
            return False
        info = self.log.read(cursor, self._read_bytes, FetchIsolation.LOG_END)
        if info.next_offset <= cursor:
            # No batch at or after the cursor below the log end: nothing there to index.
            _log.warning("delay index of %s: no batch at %d (end %d)", self.tp, cursor, end)
            self.index.append(scan_delays(b""), end)
        else:
            self.index.append(scan_delays(info.records, cursor), info.next_offset)
        self.dirty = True
        return self.index.cursor < self.log.log_end_offset

    # --- the log's observer ------------------------------------------------------------------

    def appended(self) -> None:
        self._wake(self)

    def truncated(self, log_end_offset: int, log_start_offset: int) -> None:
        self.index.drop_below(log_start_offset)
        self.dirty = True
        if self.checkpointing:
            pending = self._truncate_to
            self._truncate_to = log_end_offset if pending is None else min(pending, log_end_offset)
        else:
            self.index.truncate_to(log_end_offset)

    def log_start_moved(self, log_start_offset: int) -> None:
        self.index.drop_below(log_start_offset)
        self.dirty = True

    def closed(self, clean: bool) -> None:
        if self.done:
            return
        if self.checkpointing:
            self._close_clean = clean
        else:
            self._finish_close(clean)

    def _finish_close(self, clean: bool) -> None:
        self.done = True
        self._on_done(self)
        if not clean:
            return  # the folder is going away, or the log was left as a crash leaves it
        try:
            self.index.close()
        except OSError as exc:  # derived data: the next open re-indexes from the cursor
            _log.warning("closing the delay index of %s failed: %s", self.tp, exc)

    def detach(self) -> None:
        """Stop indexing this replica (delays switched off, replica gone): checkpointed
        unless a checkpoint is on its way, which then ends it."""
        if self.log.observer is self:
            self.log.observer = None
        self.closed(clean=True)

    # --- checkpoints -------------------------------------------------------------------------

    def prepare_checkpoint(self) -> DelayCheckpoint | None:
        """The ticket for a worker thread's ``write_checkpoint``, or None (nothing to do)."""
        if self.done or self.checkpointing or not self.dirty:
            return None
        self.dirty = False
        self.checkpointing = True
        return self.index.prepare_checkpoint()

    def checkpoint_done(self, ticket: DelayCheckpoint, failed: BaseException | None) -> None:
        """The worker thread finished ``ticket``: apply what waited for it."""
        self.checkpointing = False
        if failed is not None:
            _log.warning("delay index checkpoint of %s failed: %s", self.tp, failed)
            self.index.requeue(ticket)
            self.dirty = True
        if self._close_clean is not None:
            self._finish_close(self._close_clean and failed is None)
            return
        if self._truncate_to is not None:
            offset, self._truncate_to = self._truncate_to, None
            self.index.truncate_to(offset)
            self.dirty = True
            if self.lag:
                self._wake(self)
