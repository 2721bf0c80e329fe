"""Open a partition folder and bring it to a consistent state (Kafka ``LogLoader``).

Folder ``<data>/<topic>-<partition>/``: segments ``<base>.log/.index/.timeindex``, the
partition checkpoint (recovery point, log start offset, high watermark), the
``leader-epoch-checkpoint``, producer snapshots ``<offset>.snapshot`` and, after a clean close,
the marker ``CLEAN_SHUTDOWN_FILE``.

Loading:

1. finish or roll back an interrupted compaction (``log_cleaner.recover_interrupted_clean``,
   called only when the folder holds a ``*.cleaned`` or ``*.swap`` file); delete leftover
   ``*.tmp``/``*.deleted`` files and index files without a ``.log``. One listing of the folder
   serves this step, the marker and the segment bases (a broker loads thousands of folders at
   start: each glob or stat saved is saved thousands of times);
2. drop segments wholly below the checkpointed log start offset (a retention or delete-records
   that crashed between moving the log start offset and unlinking files);
3. clean shutdown (marker present): trust the ``.log`` but not the indexes — every segment is
   ``sanity_check``-ed and its tail state rebuilt from its last index entry; a failing segment
   is recovered like an unclean one;
4. unclean shutdown: every segment from the one holding the recovery point on is ``recover``-ed
   (framing, CRC, offset order, indexes rebuilt); at the first segment that lost bytes, all later
   segments are deleted ("we had an invalid message, delete all remaining log");
5. leader-epoch cache and producer state are trimmed to ``[log start, log end)`` (the epoch
   file is not rewritten for that: the next load trims it the same way), re-fed from
   recovered batches, and producer state replayed from its newest snapshot;
6. the recovery point becomes ``min(checkpoint, log end)`` (it only advances on fsync), the
   marker is removed and the folder fsynced, so a crash from now on forces recovery again. The
   checkpoint is rewritten only if it changed (a restart after a clean shutdown or after a
   crash that lost nothing finds it as it was: loading thousands of logs then costs one folder
   fsync each after a clean shutdown, and none after a crash). That folder fsync is
   ``sync_dir``'s job: by default done at once; a caller loading many logs (``LogManager.open``)
   passes one that queues it on worker threads, and serves none of the logs before every
   queued fsync returned.

``new_log`` stands for ``load_log`` on a folder ``log_creation`` has just made (one empty
segment, maybe a leader epoch stamped at offset 0, no partition checkpoint: an absent one reads
as zeros): it knows every file, so it reads and writes nothing.

Called once per partition before the log is used, on one thread (it uses the
``FileHandleCache``, which is not thread-safe); only ``sync_dir``'s fsyncs may run elsewhere.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from yak.errors import CorruptRecordError
from yak.record.batch_header import BatchHeader
from yak_broker.storage import checkpoint
from yak_broker.storage.checkpoint import CorruptCheckpointError, PartitionCheckpoint
from yak_broker.storage.file_handles import FileHandleCache
from yak_broker.storage.index_file import CorruptIndexError
from yak_broker.storage.leader_epoch_cache import (
    LEADER_EPOCH_CHECKPOINT_FILE_NAME,
    EpochEntry,
    LeaderEpochCache,
)
from yak_broker.storage.log_cleaner import CLEANED_SUFFIX, SWAP_SUFFIX, recover_interrupted_clean
from yak_broker.storage.log_config import LogConfig
from yak_broker.storage.producer_state import ProducerStateManager
from yak_broker.storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "NEW_LOG_CHECKPOINT",
    "LoadedLog",
    "load_log",
    "new_log",
    "replay_producer_state",
]

#: Written by ``Log.close`` after everything is flushed; its presence skips recovery.
CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
_GARBAGE_SUFFIXES = (".tmp", ".deleted")
_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
_LOG_NAME_LENGTH = 20 + len(LOG_SUFFIX)
#: What an absent partition checkpoint means (a new log): everything at offset 0.
NEW_LOG_CHECKPOINT = PartitionCheckpoint(0, 0, 0)


class LoadedLog(NamedTuple):
    """Everything ``Log`` needs to start serving a partition."""

    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    high_watermark: int
    leader_epochs: LeaderEpochCache
    producers: ProducerStateManager
    clean_shutdown: bool
    truncated_bytes: int
    #: What the partition checkpoint file holds now (so an unchanged one is not rewritten).
    checkpoint: PartitionCheckpoint


def load_log(
    directory: Path,
    config: LogConfig,
    now_ms: int,
    files: FileHandleCache | None = None,
    sync_dir: Callable[[Path], None] = checkpoint.fsync_dir,
) -> LoadedLog:
    """Load (creating if needed) the partition log in ``directory``; see the module doc.
    Segment files are opened through ``files`` (a cache of its own by default); ``sync_dir``
    makes the clean-shutdown marker's removal durable (see step 6)."""
    files = files if files is not None else FileHandleCache()
    directory.mkdir(parents=True, exist_ok=True)
    names = _remove_garbage(directory, os.listdir(directory))
    marker = directory / CLEAN_SHUTDOWN_FILE
    clean = CLEAN_SHUTDOWN_FILE in names
    # What the checkpoint file holds (None: a damaged file, rewritten below in any case).
    on_disk: PartitionCheckpoint | None = NEW_LOG_CHECKPOINT
    try:
        saved = checkpoint.read(directory / checkpoint.CHECKPOINT_FILE_NAME)
        on_disk = saved or NEW_LOG_CHECKPOINT
    except CorruptCheckpointError:
        saved, clean, on_disk = None, False, None
    bases = _segment_bases(names)
    log_start = saved.log_start_offset if saved else (bases[0] if bases else 0)
    while len(bases) > 1 and bases[1] <= log_start:
        _delete_files(directory, bases.pop(0))
    epochs = _open_epoch_cache(directory)
    # None: trust every segment (clean); otherwise recover from the segment holding this offset.
    recovery_point = None if clean else (saved.recovery_point if saved else 0)
    feed = _RecoveryFeed(epochs)
    segments, truncated = _open_segments(
        directory, bases, config, now_ms, recovery_point, feed, files
    )
    if not segments:
        segments = [LogSegment(directory, log_start, config, now_ms, files)]
    log_end = segments[-1].next_offset
    log_start = min(max(log_start, segments[0].base_offset), log_end)
    # Not written: derived from the log, so the next load trims the same (e.g. the epoch a
    # leader stamped at the end of a log still empty: one file rewrite per idle partition).
    epochs.truncate_from_end(log_end, persist=False)
    epochs.truncate_from_start(log_start, persist=False)
    producers = ProducerStateManager(
        directory, producer_id_expiration_ms=config.producer_id_expiration_ms
    )
    feed.replay(producers, segments, producers.load(log_start, log_end))
    saved_point = saved.recovery_point if saved else 0
    recovered_to = log_end if clean else min(saved_point, log_end)
    high_watermark = min(max(saved.high_watermark if saved else 0, log_start), log_end)
    current = PartitionCheckpoint(recovered_to, log_start, high_watermark)
    if clean:
        marker.unlink()
    if current != on_disk:
        checkpoint.write(directory / checkpoint.CHECKPOINT_FILE_NAME, current)
    elif clean:
        sync_dir(directory)  # the marker's removal is durable before any append
    return LoadedLog(
        segments,
        log_start,
        recovered_to,
        high_watermark,
        epochs,
        producers,
        clean,
        truncated,
        current,
    )


def new_log(
    directory: Path,
    config: LogConfig,
    now_ms: int,
    files: FileHandleCache,
    leader_epochs: Sequence[EpochEntry] = (),
) -> LoadedLog:
    """The log of a folder ``log_creation`` has just made (see the module doc)."""
    segment = LogSegment(directory, 0, config, now_ms, files, new=True)
    epochs = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT_FILE_NAME, leader_epochs)
    producers = ProducerStateManager(
        directory, producer_id_expiration_ms=config.producer_id_expiration_ms
    )
    return LoadedLog([segment], 0, 0, 0, epochs, producers, False, 0, NEW_LOG_CHECKPOINT)


def replay_producer_state(
    producers: ProducerStateManager,
    segments: list[LogSegment],
    from_offset: int,
    until_offset: int | None = None,
) -> None:
    """Feed ``producers`` every batch header in ``[from_offset, until_offset)`` (default: to
    the log end), read from the segment files."""
    for segment in segments:
        if segment.next_offset <= from_offset:
            continue
        if until_offset is not None and segment.base_offset >= until_offset:
            return
        found = segment.find_batch(from_offset)
        if found is None:
            continue
        for _, header in segment.headers_from(found[0]):
            if until_offset is not None and header.base_offset >= until_offset:
                return
            if header.base_offset >= from_offset:
                producers.update(header, header.max_timestamp)


class _RecoveryFeed:
    """Collects what recovery reads: assigns leader epochs as batches go by, and keeps the
    idempotent batch headers of the recovered tail, so producer state is replayed without
    reading those segments a second time."""

    def __init__(self, epochs: LeaderEpochCache) -> None:
        self._epochs = epochs
        self.start: int | None = None  # base offset of the first recovered segment
        self._idempotent: list[BatchHeader] = []
        self._last: BatchHeader | None = None

    def begin_segment(self, base_offset: int) -> None:
        if self.start is None:
            self.start = base_offset

    def trusted_segment(self) -> None:
        """A segment loaded without recovery after recovered ones: the tail is not covered."""
        self.start, self._idempotent, self._last = None, [], None

    def __call__(self, header: BatchHeader) -> None:
        if header.partition_leader_epoch >= 0:
            self._epochs.assign(header.partition_leader_epoch, header.base_offset)
        if header.producer_id >= 0:
            self._idempotent.append(header)
        self._last = header

    def replay(
        self, producers: ProducerStateManager, segments: list[LogSegment], from_offset: int
    ) -> None:
        if self.start is None:
            replay_producer_state(producers, segments, from_offset)
            return
        if from_offset < self.start:
            replay_producer_state(producers, segments, from_offset, self.start)
        for header in self._idempotent:
            if header.base_offset >= from_offset:
                producers.update(header, header.max_timestamp)
        if self._last is not None and self._last.base_offset >= from_offset:
            producers.update(self._last._replace(producer_id=-1), self._last.max_timestamp)


def _open_segments(
    directory: Path,
    bases: list[int],
    config: LogConfig,
    now_ms: int,
    recovery_point: int | None,
    feed: _RecoveryFeed,
    files: FileHandleCache,
) -> tuple[list[LogSegment], int]:
    """Open every segment; recover those that need it; drop the ones after a damaged one."""
    segments: list[LogSegment] = []
    for i, base in enumerate(bases):
        segment = LogSegment(directory, base, config, now_ms, files)
        segments.append(segment)
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        unflushed = recovery_point is not None and (next_base is None or next_base > recovery_point)
        if not unflushed and _load_trusted(segment, next_base):
            if feed.start is not None:
                feed.trusted_segment()
            continue
        feed.begin_segment(base)
        truncated = segment.recover(feed)
        # A segment must end where the next begins; if not, its tail was lost (e.g. it was not
        # flushed before a power loss but the next one was): keep nothing after the gap.
        if truncated or (next_base is not None and segment.next_offset != next_base):
            for later in bases[i + 1 :]:
                _delete_files(directory, later)
            return segments, truncated
    return segments, 0


def _load_trusted(segment: LogSegment, next_base: int | None) -> bool:
    """Load a segment whose data is believed intact; False if it disagrees with its indexes
    or does not end where the next segment begins."""
    try:
        segment.sanity_check()
        segment.load_tail()
    except (CorruptIndexError, CorruptRecordError):
        return False
    return next_base is None or segment.next_offset == next_base


def _open_epoch_cache(directory: Path) -> LeaderEpochCache:
    path = directory / LEADER_EPOCH_CHECKPOINT_FILE_NAME
    try:
        return LeaderEpochCache(path)
    except CorruptCheckpointError:
        # The log is the truth; batches recovered below re-assign what they carry.
        path.unlink()
        return LeaderEpochCache(path)


def _segment_bases(names: list[str]) -> list[int]:
    bases = []
    for name in names:
        if len(name) == _LOG_NAME_LENGTH and name.endswith(LOG_SUFFIX) and name[:20].isdigit():
            bases.append(int(name[:20]))
    return sorted(bases)


def _remove_garbage(directory: Path, names: list[str]) -> list[str]:
    """Step 1 over the folder's ``names``; the names left."""
    if any(name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) for name in names):
        recover_interrupted_clean(directory)
        names = os.listdir(directory)
    present = set(names)
    kept = []
    for name in names:
        orphan_index = name.endswith(_INDEX_SUFFIXES) and (
            os.path.splitext(name)[0] + LOG_SUFFIX not in present
        )
        if orphan_index or name.endswith(_GARBAGE_SUFFIXES):
            (directory / name).unlink()
        else:
            kept.append(name)
    return kept


def _delete_files(directory: Path, base: int) -> None:
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        with contextlib.suppress(FileNotFoundError):
            (directory / f"{base:020d}{suffix}").unlink()
