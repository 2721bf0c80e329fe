"""The file work ``LogManager`` hands to its I/O threads in batches: folder fsyncs while it
opens the data folder, and leader epoch files written for many logs at once.

Apart from the manager because it is plain blocking file work over lists of paths, run on a
worker thread and touching no log: each job gets its paths and bytes, and reports its failures
instead of raising them for the whole batch.

- ``FolderSyncs`` (``open``): the folder fsync each log loaded after a clean shutdown needs
  (the marker's removal made durable) is queued, ``SYNC_BATCH`` folders a job, on the I/O
  threads, and runs while the next logs load; ``wait`` returns once every one returned, and
  raises the first failure;
- ``write_each`` (``persist_epochs``): write a batch of epoch files atomically, one job per
  thread so that their fsyncs overlap; the partitions whose write failed.

Thread-safety: the jobs run on the I/O threads and use only ``checkpoint``'s functions (no
``FileHandleCache``); ``FolderSyncs`` itself is used by the thread that opens the manager.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from yak.types import TopicPartition
from yak_broker.storage import checkpoint

__all__ = ["SYNC_BATCH", "FolderSyncs", "fsync_each", "write_each"]

#: Folder fsyncs per job handed to an I/O thread by ``open``: one hand-over per 16 logs, and
#: the threads' fsyncs overlap from the 64th log on.
SYNC_BATCH = 16


class FolderSyncs:
    """The folder fsyncs ``load_log`` asks for during ``open`` (its ``sync_dir``), run a batch
    at a time on the I/O threads while loading goes on."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self._pool = pool
        self._batch: list[Path] = []
        self._jobs: list[Future[None]] = []

    def __call__(self, directory: Path) -> None:
        self._batch.append(directory)
        if len(self._batch) >= SYNC_BATCH:
            self._submit()

    def _submit(self) -> None:
        if self._batch:
            self._jobs.append(self._pool.submit(fsync_each, self._batch))
            self._batch = []

    def wait(self) -> None:
        """Run the rest, wait for every fsync; raise the first failure."""
        self._submit()
        concurrent.futures.wait(self._jobs)
        for job in self._jobs:
            job.result()

    def abandon(self) -> None:
        """Drop the batch not handed over yet, wait for the jobs that were (errors ignored)."""
        self._batch = []
        concurrent.futures.wait(self._jobs)


def fsync_each(directories: Sequence[Path]) -> None:
    """``checkpoint.fsync_dir`` each folder (on an I/O thread)."""
    for directory in directories:
        checkpoint.fsync_dir(directory)


def write_each(
    jobs: Sequence[tuple[TopicPartition, Path, bytes, int]],
) -> dict[TopicPartition, Exception]:
    """``checkpoint.write_atomically`` each job's bytes (on an I/O thread); the failures."""
    failed: dict[TopicPartition, Exception] = {}
    for tp, path, data, _ in jobs:
        try:
            checkpoint.write_atomically(path, data)
        except OSError as exc:  # reported for this partition only
            failed[tp] = exc
    return failed
