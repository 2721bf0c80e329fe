"""Creating the folders of many new partition logs at once, off the event loop (issue 19).

Creating one log at a time on the event loop cost about seven fsyncs (the topic id file, the
partition checkpoint, the leader epoch checkpoint, each written atomically with a folder fsync,
and one fsync of the data folder) and three file creations, in series: at 3,000 new replicas a
broker spent over a minute with its loop blocked in them, long enough to lose its etcd lease.
Here a batch of new logs is prepared by a small pool of worker threads (Kafka's recovery threads
do the same for loading), and only their registration runs on the loop
(``LogManager.create_logs``).

A new log's folder is built under a staging name and then renamed into place, so it appears
whole or not at all (``prepare`` then ``publish``):

1. ``prepare`` (one task per log, in parallel): ``mkdir <data>/<topic>-<p>.<id>-create`` (the
   topic cut short if the name would pass 255 bytes: ``side_name``); write
   the extra files the caller asked for (``partition.metadata``: the topic id) and, for a log
   its broker leads, ``leader-epoch-checkpoint`` with the leader epoch starting at offset 0 —
   each written, fsynced and closed; create the empty segment ``00000000000000000000.log``
   with its empty ``.index`` and ``.timeindex`` (no fsync: they hold no bytes, and their names
   are made durable by the next step); fsync the staging folder;
2. ``publish`` (one task per batch): rename each staging folder to ``<topic>-<p>``, then one
   fsync of the data folder for the whole batch.

No partition checkpoint is written: an absent one reads as recovery point, log start offset and
high watermark 0 (``log_loader``), which is what a new log has. Fsyncs per log: one per file
written (one for a follower's log, two for a leader's) and one of the staging folder, run
concurrently (the file system commits its journal for several at once); the data folder's one
per batch. Before, the same log cost seven in series.

Crash behaviour: a staging folder left by a crash (before its rename was durable) is removed
when the log manager opens the data folder; the replica manager then creates the log again.
A renamed folder holds every file above, fsynced, so it loads like any other log (no marker:
recovery scans its empty segment). Nothing is registered, so nothing is acknowledged, before
the data folder's fsync returned.

Errors are per log: ``prepare`` of one log failing (its staging folder is removed) leaves the
others of the batch alone; a failed ``publish`` rename fails that log only; a failed fsync of
the data folder fails every log of the batch.

Thread-safety: the functions touch only the files of their own staging folder, and ``publish``
only the renames of its batch; none uses the broker's ``FileHandleCache``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from yak_broker.storage.checkpoint import fsync_dir
from yak_broker.storage.leader_epoch_cache import (
    LEADER_EPOCH_CHECKPOINT_FILE_NAME,
    EpochEntry,
    encode_entries,
)
from yak_broker.storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_file

__all__ = [
    "CREATE_SUFFIX",
    "NewLog",
    "StagedLog",
    "is_staging",
    "prepare",
    "prepare_each",
    "publish",
    "side_name",
]

#: A staging folder's name ends with this (``<topic>-<p>.<hex id>-create``).
CREATE_SUFFIX = "-create"
#: The longest file name ext4 and xfs take, in bytes.
NAME_MAX = 255


def side_name(dir_name: str, suffix: str) -> str:
    """A unique sibling name for the log folder ``dir_name`` (``<topic>-<p>``), as Kafka
    names its delete folders: ``<topic>-<p>.<hex id><suffix>`` with the topic cut short so
    the name fits ``NAME_MAX`` — a topic of up to 249 characters is legal, and its folder
    fits, but the id and suffix on top of it would not (``File name too long``, for good)."""
    topic, partition = dir_name.rsplit("-", 1)
    tail = f"-{partition}.{uuid.uuid4().hex}{suffix}"
    return topic[: NAME_MAX - len(tail)] + tail  # topic names are ASCII: a byte each


class NewLog(NamedTuple):
    """A log to create in the folder ``dir_name``: extra files to write into it first, and
    the leader epoch to stamp at offset 0 when its broker leads it (None: a follower's)."""

    dir_name: str
    files: tuple[tuple[str, bytes], ...] = ()
    leader_epoch: int | None = None

    @property
    def epochs(self) -> tuple[EpochEntry, ...]:
        """The leader epoch cache's entries once created."""
        return () if self.leader_epoch is None else (EpochEntry(self.leader_epoch, 0),)


class StagedLog(NamedTuple):
    """A prepared log: its staging folder and where it goes."""

    staging: Path
    final: Path


def is_staging(path: Path) -> bool:
    """Whether ``path`` names a staging folder (garbage once the log manager opens)."""
    return path.name.endswith(CREATE_SUFFIX)


def prepare(data_dir: Path, new: NewLog) -> StagedLog:
    """Build ``new``'s folder under a staging name (see the module doc); on any error the
    staging folder is removed and the error raised."""
    final = data_dir / new.dir_name
    if final.exists():
        raise FileExistsError(f"{final} exists already")
    staging = data_dir / side_name(new.dir_name, CREATE_SUFFIX)
    os.mkdir(staging)
    try:
        for name, data in new.files:
            _write_synced(staging / name, data)
        if new.leader_epoch is not None:
            _write_synced(staging / LEADER_EPOCH_CHECKPOINT_FILE_NAME, encode_entries(new.epochs))
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            os.close(os.open(segment_file(staging, 0, suffix), _CREATE, 0o644))
        fsync_dir(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return StagedLog(staging, final)


def prepare_each(data_dir: Path, new: Sequence[NewLog]) -> list[StagedLog | Exception]:
    """``prepare`` for each of ``new`` in turn: per log its staged folder or its error."""
    results: list[StagedLog | Exception] = []
    for log in new:
        try:
            results.append(prepare(data_dir, log))
        except Exception as exc:  # this log's alone: reported for it
            results.append(exc)
    return results


def publish(data_dir: Path, staged: Sequence[StagedLog]) -> list[Path | OSError]:
    """Rename each staged folder into place, then fsync ``data_dir`` once: per log its final
    folder, or the error that failed it (its staging folder is then removed)."""
    results: list[Path | OSError] = []
    for log in staged:
        try:
            if log.final.exists():  # renaming onto an empty folder would replace it
                raise FileExistsError(f"{log.final} exists already")
            os.rename(log.staging, log.final)
        except OSError as exc:
            shutil.rmtree(log.staging, ignore_errors=True)
            results.append(exc)
        else:
            results.append(log.final)
    if any(isinstance(result, Path) for result in results):
        try:
            fsync_dir(data_dir)
        except OSError as exc:
            for result in results:
                if isinstance(result, Path):  # not known durable: never half-created
                    with contextlib.suppress(OSError):
                        shutil.rmtree(result)
            return [exc for _ in results]
    return results


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, _CREATE, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
