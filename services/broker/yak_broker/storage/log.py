"""The log of one partition replica: the facade over its segments (Kafka ``UnifiedLog``).

Offsets: ``log_start_offset`` (first readable) <= ``high_watermark`` (replicated; consumers read
below it) <= ``log_end_offset`` (LEO, next offset to assign). ``recovery_point``: every offset
below it is fsynced; recovery after a crash rescans from the segment holding it.

This module holds what is done with the data: appends, reads, leader epochs, truncation and
retention. The log's state as loaded, its offsets, flushes, checkpoint, dirty-tracking hooks and
close are ``log_durability.LogDurability``'s, which ``Log`` extends (its methods are the log's
own: no indirection on the append path).

Append path (``append``): validate the whole request (``log_validator``), roll if the active
segment is full or old, write the batches with their assigned offsets, update indexes, leader
epoch cache and producer state, and fsync when ``flush.messages`` says so. In ``flush.mode=sync``
the async ``GroupCommitter`` waits for the shared fsync; this class never blocks on one itself
except for ``flush``. Reads (``read``) return whole batches of one segment, found by a binary
search over segment base offsets and then the segment's sparse offset index; from a sealed
segment only the batches before the first whose CRC fails (bit rot), and a read starting at a
damaged batch raises ``DamagedBatchError`` (see ``damaged_batch``).

Crash behaviour: see ``log_loader`` (recovery) and ``segment``. Checkpoints are written
atomically, and before files are deleted, so a crash never leaves the checkpoint pointing into
deleted data or trusting unflushed bytes after a truncation.

Dirty tracking: an append to a flushed log, and a truncation that restarts the log above its
recovery point, call the owner's ``on_unflushed`` hook (see ``log_durability``).

Observer: an owner of data derived from the log (the delay index) sets ``observer``
(``LogObserver``) and hears, synchronously, of every append, truncation, move of the log start
and close; ``None`` (the default) costs one attribute check per append.

Thread-safety: single writer. Every method runs on the owner's thread (the broker's event
loop); only the descriptors from ``prepare_flush`` (duplicates, owned by the ticket) may be
fsynced on another thread.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Protocol

from yak.clock import Clock, SystemClock
from yak.errors import OffsetOutOfRangeError
from yak.record.batch_header import BatchHeader, iter_batches, patch_offset_and_epoch
from yak_broker.storage.checkpoint import fsync_dir
from yak_broker.storage.damaged_batch import intact_prefix
from yak_broker.storage.file_handles import FileHandleCache
from yak_broker.storage.log_cleaner import SwapPlan, complete_swap
from yak_broker.storage.log_config import LogConfig
from yak_broker.storage.log_durability import LogDurability
from yak_broker.storage.log_info import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchDataInfo,
    FetchIsolation,
    FlushTicket,
    LogAppendInfo,
)
from yak_broker.storage.log_loader import replay_producer_state
from yak_broker.storage.log_validator import (
    ValidatedAppend,
    validate_follower_append,
    validate_leader_append,
)
from yak_broker.storage.retention import SegmentSummary, deletable_segments
from yak_broker.storage.segment import LogSegment

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "FetchDataInfo",
    "FetchIsolation",
    "FlushTicket",
    "Log",
    "LogAppendInfo",
    "LogObserver",
]

_EMPTY = memoryview(b"")


def _next_offset(records: memoryview) -> int:
    """The offset after the last of ``records`` (whole, intact batches)."""
    last = 0
    for _, header in iter_batches(records, check_crc=False):
        last = header.next_offset
    return last


class LogObserver(Protocol):
    """Hears what changes a log's data, on the log's thread, after the change is made."""

    def appended(self) -> None:
        """Batches were appended (leader or follower): the log end offset moved."""

    def truncated(self, log_end_offset: int, log_start_offset: int) -> None:
        """Everything at or above ``log_end_offset`` is gone (``truncate_to``), and below
        ``log_start_offset`` too after ``truncate_fully_and_start_at``."""

    def log_start_moved(self, log_start_offset: int) -> None:
        """Retention or DeleteRecords moved the log start offset up."""

    def closed(self, clean: bool) -> None:
        """The log is closing (``clean``: a clean shutdown; otherwise it may be deleted)."""


class Log(LogDurability):
    """One partition replica's log in ``directory``; ``Log.open`` loads or creates it
    (``loaded``: what ``log_loader`` already loaded, e.g. a ``new_log``). Its state, offsets,
    flushes, checkpoint and close are ``LogDurability``'s."""

    #: Told of appends, truncations, log start moves and close (see the module doc).
    observer: LogObserver | None = None

    @classmethod
    def open(
        cls,
        directory: Path | str,
        config: LogConfig | None = None,
        clock: Clock | None = None,
        files: FileHandleCache | None = None,
    ) -> Log:
        return cls(Path(directory), config or LogConfig(), clock or SystemClock(), files)

    # --- leader epochs (replication) --------------------------------------------------------

    @property
    def latest_epoch(self) -> int | None:
        """The newest leader epoch in the epoch cache (None: the log knows no epoch)."""
        return self.leader_epochs.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch over this log (KIP-279; ``LeaderEpochCache.end_offset_for``)."""
        return self.leader_epochs.end_offset_for(epoch, self.log_end_offset)

    def assign_epoch(self, epoch: int, start_offset: int, *, persist: bool = True) -> None:
        """A new leader stamps its epoch at its log end before any append (Kafka's
        ``becomeLeader``), so the epoch's start is known even if nothing is appended in it.
        ``persist=False``: the caller writes the epoch file (``LogManager.persist_epochs``)."""
        self.leader_epochs.assign(epoch, start_offset, persist=persist)
        self._current_epoch = self.leader_epochs.latest_epoch

    # --- append --------------------------------------------------------------------------

    def append(self, records: bytes | bytearray | memoryview, leader_epoch: int) -> LogAppendInfo:
        """Append a client request of one or more batches as leader of ``leader_epoch``.

        Raises CorruptRecordError, InvalidRecordError, MessageTooLargeError,
        UnsupportedCompressionTypeError, OutOfOrderSequenceError or InvalidProducerEpochError
        before writing anything. A retried idempotent batch returns its first offsets with
        ``duplicate=True`` and appends nothing.
        """
        view = memoryview(records)
        validated = validate_leader_append(
            view, self.log_end_offset, leader_epoch, self.config, self.producers
        )
        if validated.duplicate is not None:
            dup = validated.duplicate
            return LogAppendInfo(
                dup.base_offset, dup.last_offset, dup.timestamp, self._log_start_offset, 0, True
            )
        self._write(view, validated, patch=True)
        return self._info(validated)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches copied from the leader, keeping their offsets and epochs."""
        view = memoryview(records)
        validated = validate_follower_append(view, self.log_end_offset, self.config)
        self._write(view, validated, patch=False)
        return self._info(validated)

    def append_control(self, batch: bytes, leader_epoch: int) -> LogAppendInfo:
        """Append one control batch the broker wrote itself (a delay cancel), as leader of
        ``leader_epoch``. Clients' control batches are refused by ``append``; this path takes
        the batch as a follower copy would, after stamping its base offset (the log end) and
        leader epoch, both outside the batch CRC."""
        stamped = bytearray(batch)
        patch_offset_and_epoch(stamped, 0, self.log_end_offset, leader_epoch)
        view = memoryview(stamped)
        validated = validate_follower_append(view, self.log_end_offset, self.config)
        if len(validated.batches) != 1 or not validated.batches[0].header.is_control:
            raise ValueError("append_control takes exactly one control batch")
        self._write(view, validated, patch=False)
        return self._info(validated)

    def _info(self, validated: ValidatedAppend) -> LogAppendInfo:
        return LogAppendInfo(
            validated.first_offset,
            validated.last_offset,
            validated.max_timestamp,
            self._log_start_offset,
            validated.record_count,
        )

    def _write(self, view: memoryview, validated: ValidatedAppend, patch: bool) -> None:
        now_ms = self._clock.time_ms()
        segment = self._segments[-1]
        was_flushed = self._recovery_point >= segment.next_offset
        if segment.should_roll(
            validated.size,
            validated.max_timestamp,
            validated.last_offset,
            now_ms,
            self.config,
            self._jitter_ms,
        ):
            segment = self.roll()
        batches = validated.batches
        segment.append(view, batches, patch, validated.size)
        if patch:  # a leader append: one epoch for all batches
            self._assign_epoch(batches[0].header)
        else:
            for _, header in batches:
                self._assign_epoch(header)
        for _, header in batches:
            if header.producer_id >= 0:
                self.producers.update(header, now_ms)
        # Batches without a producer id only move the producer state's end offset: done
        # lazily (``_sync_producer_end``) before anything reads it.
        self._producer_end_header = batches[-1].header
        if was_flushed and self.on_unflushed is not None:
            self.on_unflushed()
        self._unflushed_messages += validated.record_count
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()
        if self.observer is not None:
            self.observer.appended()

    def _assign_epoch(self, header: BatchHeader) -> None:
        epoch = header.partition_leader_epoch
        if epoch >= 0 and epoch != self._current_epoch:  # the cache changes once per epoch
            self.leader_epochs.assign(epoch, header.base_offset)
            self._current_epoch = self.leader_epochs.latest_epoch

    def roll(self) -> LogSegment:
        """Start a new active segment at the LEO (no-op if the active one is empty)."""
        active = self._segments[-1]
        if active.size == 0:
            return active
        active.on_become_inactive()
        self._index_sync_pending.append(active)
        self._sync_producer_end()
        self.producers.take_snapshot()
        segment = LogSegment(
            self.directory, self.log_end_offset, self.config, self._clock.time_ms(), self._files
        )
        self._segments.append(segment)
        self._bases.append(segment.base_offset)
        fsync_dir(self.directory)  # the new file's name must be durable before acks rely on it
        return segment

    # --- read ----------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK
    ) -> FetchDataInfo:
        """Whole batches from the one holding ``offset``: up to ``max_bytes`` but at least one.

        Raises OffsetOutOfRangeError below the log start offset or above the LEO; returns no
        records at or above the isolation bound (high watermark or LEO).
        """
        end = self.log_end_offset
        upper = self._high_watermark if isolation is FetchIsolation.HIGH_WATERMARK else end
        if offset < self._log_start_offset or offset > end:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self._log_start_offset}, {end}]",
                offset=offset,
                log_start_offset=self._log_start_offset,
                log_end_offset=end,
            )
        index = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        if offset < upper:
            for segment in self._segments[index:]:
                found = segment.find_batch(offset)
                if found is None:
                    continue
                if found[1].base_offset >= upper:
                    break
                data = segment.read(found[0], max_bytes, upper)
                if segment is self._segments[-1]:
                    return self._fetched(data.records, data.next_offset)
                records = intact_prefix(data.records, self.directory.name, offset)
                if len(records) == len(data.records):
                    return self._fetched(records, data.next_offset)
                return self._fetched(records, _next_offset(records))
        return self._fetched(_EMPTY, offset)

    def _fetched(self, records: memoryview, next_offset: int) -> FetchDataInfo:
        return FetchDataInfo(
            records, next_offset, self._high_watermark, self._log_start_offset, self.log_end_offset
        )

    def offset_for_timestamp(
        self, timestamp: int, isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK
    ) -> int | None:
        """ListOffsets: base offset of the first batch with a max timestamp >= ``timestamp``.

        ``LATEST_TIMESTAMP`` gives the isolation bound, ``EARLIEST_TIMESTAMP`` the log start.
        Batch granularity: records are not decoded, so the answer may precede the first
        matching record within its batch. ``None`` when no batch qualifies.
        """
        upper = (
            self._high_watermark
            if isolation is FetchIsolation.HIGH_WATERMARK
            else (self.log_end_offset)
        )
        if timestamp == LATEST_TIMESTAMP:
            return upper
        if timestamp == EARLIEST_TIMESTAMP:
            return self._log_start_offset
        for segment in self._segments:
            if segment.max_timestamp < timestamp:
                continue
            found = segment.find_offset_for_timestamp(timestamp)
            if found is not None:
                found = max(found, self._log_start_offset)
                return found if found < upper else None
        return None

    # --- truncation, retention ---------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove everything from the batch holding ``offset`` on (a follower diverged).

        Returns False if ``offset`` >= LEO (nothing to do).
        """
        if offset >= self.log_end_offset:
            # As Kafka's truncateTo: still drop epochs stamped at the log end. A broker that
            # led an epoch without appending to it must not answer for that epoch once it
            # follows (KIP-279).
            self.leader_epochs.truncate_from_end(self.log_end_offset)
            self._current_epoch = self.leader_epochs.latest_epoch
            return False
        if offset < self._log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        while self._segments[-1].base_offset > offset:
            self._bases.pop()
            self._segments.pop().delete()
        self._segments[-1].truncate_to(offset)
        self._after_truncation()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset``."""
        for segment in self._segments:
            segment.delete()
        self._segments = [
            LogSegment(self.directory, offset, self.config, self._clock.time_ms(), self._files)
        ]
        self._bases = [offset]
        self._log_start_offset = offset
        self._high_watermark = offset  # the empty log's end; never below its start
        self.leader_epochs.clear()
        self._current_epoch = None
        self._after_truncation()
        if self.has_unflushed and self.on_unflushed is not None:
            self.on_unflushed()  # the new segment starts above the recovery point

    def _after_truncation(self) -> None:
        self._generation += 1
        self._sync_producer_end()  # so the state knows how far it went before truncating it
        end = self.log_end_offset
        self._high_watermark = min(self._high_watermark, end)
        self._recovery_point = min(self._recovery_point, end)
        self._offsets_moved()
        self.leader_epochs.truncate_from_end(end)
        self._current_epoch = self.leader_epochs.latest_epoch
        replay_from = self.producers.truncate_to(self._log_start_offset, end)
        replay_producer_state(self.producers, self._segments, replay_from)
        self.write_checkpoint()
        if self.observer is not None:
            self.observer.truncated(end, self._log_start_offset)

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (<= high watermark)."""
        if offset > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete records up to {offset}, above the high watermark "
                f"{self._high_watermark}",
                offset=offset,
            )
        if offset > self._log_start_offset:
            self._advance_log_start(offset)
            self.delete_old_segments()
        return self._log_start_offset

    def delete_old_segments(self) -> int:
        """Apply retention (see ``retention``); return the number of segments deleted."""
        summaries = [
            SegmentSummary(s.base_offset, s.size, s.largest_timestamp()) for s in self._segments
        ]
        count = deletable_segments(
            summaries,
            self.config,
            self._clock.time_ms(),
            self._log_start_offset,
            self._high_watermark,
        )
        if count == 0:
            return 0
        self._advance_log_start(max(self._log_start_offset, self._bases[count]))
        for segment in self._segments[:count]:
            segment.delete()
        del self._segments[:count]
        del self._bases[:count]
        return count

    def _advance_log_start(self, offset: int) -> None:
        """Persist the new log start before any file goes (Kafka's order)."""
        self._log_start_offset = offset
        self._high_watermark = max(self._high_watermark, offset)
        # Recovery would rescan the whole segment holding ``offset`` anyway.
        self._recovery_point = max(self._recovery_point, offset)
        self._offsets_moved()
        self.write_checkpoint()
        self.leader_epochs.truncate_from_start(offset)
        self._current_epoch = self.leader_epochs.latest_epoch
        self.producers.delete_snapshots_below(offset)
        if self.observer is not None:
            self.observer.log_start_moved(offset)

    def replace_segments(self, base_offset: int, replaced: tuple[int, ...]) -> None:
        """Swap in a compacted segment: ``<base_offset>.log.swap`` replaces the closed
        segments ``replaced`` (the cleaner's ``SwapPlan``); its indexes are rebuilt."""
        doomed = set(replaced)
        if self._segments[-1].base_offset in doomed:
            raise ValueError("the active segment is never compacted")
        for segment in self._segments:
            if segment.base_offset in doomed:
                segment.close()
        complete_swap(self.directory, SwapPlan(base_offset, replaced))
        kept = [s for s in self._segments if s.base_offset not in doomed]
        fresh = LogSegment(
            self.directory, base_offset, self.config, self._clock.time_ms(), self._files
        )
        fresh.recover()
        fresh.on_become_inactive()
        self._index_sync_pending.append(fresh)
        self._segments = sorted([*kept, fresh], key=lambda segment: segment.base_offset)
        self._bases = [segment.base_offset for segment in self._segments]

    # --- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Tell the observer, then close cleanly (``LogDurability.close``)."""
        self._tell_closed(clean=True)
        super().close()

    def close_without_marker(self) -> None:
        self._tell_closed(clean=False)
        super().close_without_marker()

    def _tell_closed(self, clean: bool) -> None:
        observer, self.observer = self.observer, None
        if observer is not None:
            observer.closed(clean)

    def remove_expired_producers(self) -> list[int]:
        return self.producers.remove_expired(self._clock.time_ms())
