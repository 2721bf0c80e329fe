"""All partition logs of one broker data folder (Kafka ``LogManager``).

Folder layout: ``<data>/.lock`` (held with ``flock`` while a manager owns the folder, so a
second broker process — or a second manager in this one — fails with ``LogDirLockedError``),
and one folder per partition replica, ``<topic>-<partition>`` (see ``log_loader``). A folder
being deleted is first renamed to ``<topic>-<partition>.<id>-delete``; one being created is built
as ``<topic>-<partition>.<id>-create`` and renamed into place (``log_creation``); leftovers of
either kind are removed at start.

Opening (``open``): lock the folder, remove leftovers, then load every partition folder in name
order with ``log_loader.load_log``, on the calling thread. Loading a small log is Python work
(0.3-0.4 ms of CPU), which worker threads only serialise on the GIL: over 5,000 small logs on
two cores, four loading threads took up to twice as long as one (issue 19). What does wait is
the one folder fsync each log loaded after a clean shutdown needs (the marker's removal made
durable; a millisecond or more on a busy disk, 20 s for 20,000 logs in series). Those are
queued in batches on the ``io_threads`` worker threads (``io_jobs.FolderSyncs``) and run while
the next logs load; ``open`` returns only once every one returned, so no log is served (appended
to) before its marker's removal is durable. A log that fails to load, or a failed fsync, fails
``open``: the fsyncs under way are awaited, the logs loaded so far closed (no marker), the
worker threads ended, the folder unlocked, and the error raised.

Creation: ``get_or_create`` makes one log on the event loop (tests, tools); the replica manager
makes its new replicas' logs in batches with ``create_logs``, whose file work (folders, files,
fsyncs) runs on ``io_threads`` worker threads while the loop serves requests; the loop only
registers the results.

Background work, as asyncio tasks paced by the injected ``Clock``:

- flush: every ``flush_check_interval_ms``, fsync the logs whose ``flush.ms`` elapsed or that
  rolled a segment since their last flush (Kafka's ``flush-log`` task), off the event loop;
- checkpoints: every ``checkpoint_interval_ms``, persist the recovery point, log start offset
  and high watermark of each log whose offsets moved;
- retention: every ``retention_check_interval_ms``, ``Log.delete_old_segments`` and expiry of
  idle producer ids;
- cleaning: every ``cleaner_interval_ms``, the ``cleaner`` callback (by default a
  ``compaction.Compactor``) for each log with ``cleanup.policy`` containing ``compact``.

The flush and checkpoint tasks visit only the logs that need them (issue 19: 20,000 idle logs
walked every second cost half a broker's idle CPU). Each log tells the manager through its hooks
(``Log.on_unflushed``, ``Log.on_checkpoint_stale``) when it gets unflushed data or its offsets
move; the manager keeps those logs in two dirty sets, in the order they became dirty. The flush
task asks each log of its set ``Log.flush_due`` as before, and drops it once it is fully
flushed (a log whose ``flush.ms`` has not elapsed stays); the checkpoint task writes each log of
its set and drops it. A deleted or closed log leaves both sets.

``shutdown`` stops the tasks, closes every log cleanly (flush, snapshots, checkpoints, marker)
and releases the lock.

Open files: every log's segment and index files go through one ``FileHandleCache`` (``files``),
at most ``max_open_files`` descriptors (``YAK_MAX_OPEN_FILES``; by default half the soft
``RLIMIT_NOFILE`` as it is when ``open`` runs, i.e. after the service raised it, between 64
and 4,096: see ``file_handles.default_max_open_files``). Besides those the manager holds its
lock file, in-flight fsyncs their duplicates, and checkpoint writes a file for a moment.

Concurrency: one event loop; the logs it hands out are used on it. The worker threads touch
only folders no log of the loop uses yet (creation), or fsync folders of logs not handed out yet
(``open``); they never use the ``FileHandleCache``.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from yak.clock import Clock, SystemClock
from yak.errors import KafkaStorageError, UnknownTopicOrPartitionError
from yak.heap import HeapFreezer
from yak.types import TopicPartition
from yak_broker.storage import checkpoint, log_creation
from yak_broker.storage.compaction import Compactor
from yak_broker.storage.file_handles import FileHandleCache, default_max_open_files
from yak_broker.storage.group_commit import GroupCommitter
from yak_broker.storage.io_jobs import FolderSyncs, write_each
from yak_broker.storage.log import Log
from yak_broker.storage.log_config import LogConfig
from yak_broker.storage.log_creation import NewLog, StagedLog
from yak_broker.storage.log_loader import load_log, new_log

__all__ = ["LOCK_FILE", "LogDirLockedError", "LogManager", "LogRequest"]

LOCK_FILE = ".lock"
_DELETE_SUFFIX = "-delete"
#: Logs handled between two yields of the event loop in periodic work over every log.
#: Logs from which the heap is frozen as they settle (``yak.heap``): below it a full collection
#: is short, and a frozen heap measured slower under load (e2e at 10,000 msg/s, 4 partitions).
FREEZE_FROM_LOGS = 2_000
CHUNK = 64
#: Worker threads for file work over many logs (creation): fsyncs issued together share the
#: file system's journal commits (4 threads: ~10x the fsyncs per second of one, measured).
DEFAULT_IO_THREADS = 4
_log = logging.getLogger(__name__)


class LogDirLockedError(KafkaStorageError):
    """Another log manager (usually another broker process) holds the data folder.

    A ``KAFKA_STORAGE_ERROR`` like any folder failure; a client that gets the code back
    rebuilds the general ``KafkaStorageError`` (the first class declaring it)."""


class LogRequest(NamedTuple):
    """A log for ``LogManager.create_logs`` to make: ``files`` (name, bytes) written into its
    folder before it appears, and the leader epoch to stamp at offset 0 if this broker leads
    it."""

    tp: TopicPartition
    config: LogConfig
    files: tuple[tuple[str, bytes], ...] = ()
    leader_epoch: int | None = None


class LogManager:
    """Owns the partition logs under ``data_dir``; see the module doc."""

    def __init__(
        self,
        data_dir: Path | str,
        *,
        clock: Clock | None = None,
        default_config: LogConfig | None = None,
        topic_config: Callable[[str], LogConfig | None] | None = None,
        flush_check_interval_ms: int = 1_000,
        checkpoint_interval_ms: int = 60_000,
        retention_check_interval_ms: int = 300_000,
        cleaner: Callable[[Log], Awaitable[None]] | None = None,
        cleaner_interval_ms: int = 15_000,
        max_open_files: int | None = None,
        io_threads: int = DEFAULT_IO_THREADS,
        heap: HeapFreezer | None = None,
        freeze_from_logs: int = FREEZE_FROM_LOGS,
    ) -> None:
        self.data_dir = Path(data_dir)
        #: Told when logs are loaded, created or deleted (None: the heap is left alone).
        self._heap = heap
        self._freeze_from_logs = freeze_from_logs
        self._io_threads = io_threads
        self._io_pool: ThreadPoolExecutor | None = None
        self._max_open_files = max_open_files
        #: The descriptors of every log's segment files (bound settled by ``open``).
        self.files = FileHandleCache(max_open_files)
        self._clock = clock or SystemClock()
        self._default_config = default_config or LogConfig()
        self._topic_config = topic_config
        self._intervals = {
            "flush": flush_check_interval_ms,
            "checkpoint": checkpoint_interval_ms,
            "retention": retention_check_interval_ms,
            "cleaner": cleaner_interval_ms,
        }
        self._cleaner = cleaner if cleaner is not None else Compactor(self._clock)
        self._logs: dict[TopicPartition, GroupCommitter] = {}
        #: The dirty sets (see the module doc), in the order the logs became dirty.
        self._unflushed: dict[TopicPartition, GroupCommitter] = {}
        self._stale: dict[TopicPartition, GroupCommitter] = {}
        self._lock_fd = -1
        self._tasks: list[asyncio.Task[None]] = []

    # --- lifecycle -----------------------------------------------------------------------

    def open(self) -> None:
        """Lock the data folder and load every partition log in it (see the module doc)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock()
        if self._max_open_files is None:  # the limit may have been raised since __init__
            self.files.max_open = default_max_open_files()
        _log.info("segment files: at most %d open at a time", self.files.max_open)
        started_ms = self._clock.time_ms()
        syncs = FolderSyncs(self._pool())
        try:
            for path in sorted(self.data_dir.iterdir()):
                doomed = path.name.endswith(_DELETE_SUFFIX) or log_creation.is_staging(path)
                if path.is_dir() and doomed:
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                tp = TopicPartition.parse(path.name) if path.is_dir() else None
                if tp is not None:
                    config = self.config_for(tp.topic)
                    loaded = load_log(path, config, self._clock.time_ms(), self.files, syncs)
                    self._register(tp, Log(path, config, self._clock, self.files, loaded))
            syncs.wait()
        except BaseException:
            syncs.abandon()
            self._close_logs(clean=False)
            self._stop_pool()
            self._unlock()
            raise
        elapsed_ms = self._clock.time_ms() - started_ms
        _log.info("loaded %d logs in %d ms", len(self._logs), elapsed_ms)

    async def start(self) -> None:
        """``open`` (if not done) and start the background tasks."""
        if self._lock_fd < 0:
            self.open()
        if self._heap is not None and len(self._logs) >= self._freeze_from_logs:
            self._heap.grew()
        schedule = [
            ("flush", self.flush_due_logs),
            ("checkpoint", self.write_checkpoints),
            ("retention", self.run_retention),
        ]
        schedule.append(("cleaner", self.run_cleaner))
        for name, action in schedule:
            task = asyncio.create_task(self._every(self._intervals[name], action))
            task.set_name(f"log-manager-{name}")
            self._tasks.append(task)

    async def shutdown(self) -> None:
        """Stop background work, close every log cleanly, release the folder."""
        if self._heap is not None:
            self._heap.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for committer in self._logs.values():
            await committer.close()
        # A creation cancelled meanwhile may still be at work.
        await asyncio.to_thread(self._stop_pool)
        self._close_logs(clean=True)
        self._unlock()

    def _lock(self) -> None:
        fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise LogDirLockedError(
                f"data folder {self.data_dir} is in use by another log manager "
                f"(lock {LOCK_FILE} is held)",
                data_dir=str(self.data_dir),
            ) from exc
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = -1

    def _close_logs(self, clean: bool) -> None:
        for committer in self._logs.values():
            if clean:
                committer.log.close()
            else:
                committer.log.close_without_marker()
        self._logs.clear()
        self._unflushed.clear()
        self._stale.clear()

    # --- partitions ------------------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        found = self._topic_config(topic) if self._topic_config else None
        return found or self._default_config

    @property
    def logs(self) -> Mapping[TopicPartition, GroupCommitter]:
        return MappingProxyType(self._logs)

    def get(self, tp: TopicPartition) -> GroupCommitter:
        """The partition's log; UnknownTopicOrPartitionError if this broker has none."""
        try:
            return self._logs[tp]
        except KeyError:
            raise UnknownTopicOrPartitionError(
                f"no log for {tp.dir_name} on this broker", topic=tp.topic, partition=tp.partition
            ) from None

    def get_or_create(self, tp: TopicPartition, config: LogConfig | None = None) -> GroupCommitter:
        """The partition's log, created empty (and durably) if it does not exist."""
        committer = self._logs.get(tp)
        if committer is None:
            directory = self.data_dir / tp.dir_name
            log = Log(directory, config or self.config_for(tp.topic), self._clock, self.files)
            checkpoint.fsync_dir(self.data_dir)
            committer = self._register(tp, log)
        elif config is not None:
            committer.log.update_config(config)
        return committer

    async def create_logs(
        self, requests: Sequence[LogRequest]
    ) -> dict[TopicPartition, GroupCommitter | Exception]:
        """Create the logs ``requests`` ask for, in bulk (see the module doc and
        ``log_creation``): per partition its new log, or the error that failed it (the others
        are created all the same). A partition that has a log already gets it (config
        updated); a folder found on disk without a log is loaded as it is."""
        results: dict[TopicPartition, GroupCommitter | Exception] = {}
        todo: list[LogRequest] = []
        for request in requests:
            if request.tp in self._logs:
                results[request.tp] = self.get_or_create(request.tp, request.config)
            else:
                todo.append(request)
        if not todo:
            return results
        loop = asyncio.get_running_loop()
        pool = self._pool()
        new = [NewLog(r.tp.dir_name, r.files, r.leader_epoch) for r in todo]
        # One job per thread, each preparing every n-th log: the threads' fsyncs overlap, and
        # the loop hands over and collects a few jobs, not one per log.
        threads = max(min(self._io_threads, len(new)), 1)
        prepare = log_creation.prepare_each
        parts = await asyncio.gather(
            *(
                loop.run_in_executor(pool, prepare, self.data_dir, new[i::threads])
                for i in range(threads)
            )
        )
        prepared = [parts[i % threads][i // threads] for i in range(len(new))]
        staged = [
            (r, n, p)
            for r, n, p in zip(todo, new, prepared, strict=True)
            if isinstance(p, StagedLog)
        ]
        published = await loop.run_in_executor(
            pool, log_creation.publish, self.data_dir, [p for _, _, p in staged]
        )
        for request, outcome in zip(todo, prepared, strict=True):
            if isinstance(outcome, FileExistsError):
                results[request.tp] = self._load_existing(request)
            elif isinstance(outcome, Exception):
                results[request.tp] = outcome
        now_ms = self._clock.time_ms()
        for index, ((request, wanted, _), folder) in enumerate(
            zip(staged, published, strict=True), 1
        ):
            if isinstance(folder, Exception):
                results[request.tp] = folder
            else:
                loaded = new_log(folder, request.config, now_ms, self.files, wanted.epochs)
                log = Log(folder, request.config, self._clock, self.files, loaded)
                results[request.tp] = self._register(request.tp, log)
            if index % CHUNK == 0:
                await asyncio.sleep(0)  # registering hundreds of logs: let the loop breathe
        if self._heap is not None and staged and len(self._logs) >= self._freeze_from_logs:
            self._heap.grew()
        return results

    async def persist_epochs(
        self, logs: Sequence[tuple[TopicPartition, Log]]
    ) -> dict[TopicPartition, Exception]:
        """Write the leader epoch files of ``logs`` (stamped with ``persist=False``) on the I/O
        threads, their fsyncs overlapping; the partitions whose write failed (the others are
        marked persisted). The caller keeps the logs still meanwhile (no appends, no
        truncation): they are neither led nor followed until this returns."""
        jobs = [(tp, *log.leader_epochs.checkpoint()) for tp, log in logs]
        if not jobs:
            return {}
        loop = asyncio.get_running_loop()
        pool = self._pool()
        threads = max(min(self._io_threads, len(jobs)), 1)
        parts = await asyncio.gather(
            *(loop.run_in_executor(pool, write_each, jobs[i::threads]) for i in range(threads))
        )
        failed = {tp: error for part in parts for tp, error in part.items()}
        for (tp, log), (_, _, _, changes) in zip(logs, jobs, strict=True):
            if tp not in failed:
                log.leader_epochs.persisted(changes)
        return failed

    def _register(self, tp: TopicPartition, log: Log) -> GroupCommitter:
        """Serve ``log`` as ``tp``'s, its hooks feeding the dirty sets."""
        committer = self._logs[tp] = GroupCommitter(log)
        # A C-level call per hook: an append to a flushed log costs one dict store.
        log.on_unflushed = partial(self._unflushed.__setitem__, tp, committer)
        log.on_checkpoint_stale = partial(self._stale.__setitem__, tp, committer)
        if log.has_unflushed:  # e.g. loaded after a crash: recovery point below the LEO
            self._unflushed[tp] = committer
        if log.checkpoint_stale:
            self._stale[tp] = committer
        return committer

    def _load_existing(self, request: LogRequest) -> GroupCommitter | Exception:
        try:
            return self.get_or_create(request.tp, request.config)
        except Exception as exc:  # reported for this partition only
            return exc

    def _pool(self) -> ThreadPoolExecutor:
        if self._io_pool is None:
            self._io_pool = ThreadPoolExecutor(self._io_threads, thread_name_prefix="log-io")
        return self._io_pool

    def _stop_pool(self) -> None:
        """Wait for the I/O threads' jobs and end the threads (blocks)."""
        pool, self._io_pool = self._io_pool, None
        if pool is not None:
            pool.shutdown()

    async def delete(self, tp: TopicPartition) -> None:
        """Remove the partition's log and folder (rename first, so a crash finishes the job)."""
        committer = self._logs.pop(tp, None)
        if committer is None:
            return
        self._unflushed.pop(tp, None)
        self._stale.pop(tp, None)
        committer.log.on_unflushed = committer.log.on_checkpoint_stale = None
        if self._heap is not None:
            self._heap.shrank()
        await committer.close()
        committer.log.close_without_marker()
        doomed = self.data_dir / log_creation.side_name(tp.dir_name, _DELETE_SUFFIX)
        os.rename(committer.log.directory, doomed)
        checkpoint.fsync_dir(self.data_dir)
        await asyncio.to_thread(shutil.rmtree, doomed, True)

    # --- background work -------------------------------------------------------------------

    async def _in_chunks(
        self, logs: Mapping[TopicPartition, GroupCommitter] | None = None
    ) -> AsyncIterator[tuple[TopicPartition, GroupCommitter]]:
        """The logs of ``logs`` (every log by default) as they are now, yielding the event loop
        after each ``CHUNK`` of them: periodic work over thousands of partitions never holds
        the loop long enough to starve a lease."""
        chosen = self._logs if logs is None else logs
        for index, item in enumerate(list(chosen.items()), 1):
            yield item
            if index % CHUNK == 0:
                await asyncio.sleep(0)

    async def _every(self, interval_ms: int, action: Callable[[], Awaitable[None]]) -> None:
        while True:
            await self._clock.sleep(interval_ms / 1000)
            try:
                await action()
            except Exception:
                _log.exception("log manager task %s failed; retrying next interval", action)

    async def flush_due_logs(self) -> None:
        """fsync each log with unflushed data whose flush policy says so; forget the flushed."""
        unflushed = self._unflushed
        async for tp, committer in self._in_chunks(unflushed):
            if unflushed.get(tp) is not committer:
                continue  # deleted (or closed) since the pass began
            if committer.log.flush_due():
                await committer.flush()
            # No await between the check and the removal: an append after it notifies anew.
            if not committer.log.has_unflushed and unflushed.get(tp) is committer:
                del unflushed[tp]

    async def write_checkpoints(self) -> None:
        """Write the checkpoint of each log whose offsets moved since its last one."""
        stale = self._stale
        async for tp, committer in self._in_chunks(stale):
            if stale.get(tp) is committer:
                committer.log.write_checkpoint()
                del stale[tp]

    async def run_retention(self) -> None:
        async for _, committer in self._in_chunks():
            deleted = committer.log.delete_old_segments()
            if deleted:
                _log.info("retention deleted %d segment(s) of %s", deleted, committer.log)
            committer.log.remove_expired_producers()

    async def run_cleaner(self) -> None:
        async for _, committer in self._in_chunks():
            if committer.log.config.compact:
                await self._cleaner(committer.log)
