"""Tests for yak_broker.storage.group_commit: sync appends wait for one shared fsync."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from tests.unit.broker.storage.batches import make_batch
from yak.clock import FakeClock
from yak.errors import NotLeaderOrFollowerError
from yak_broker.storage.group_commit import GroupCommitter
from yak_broker.storage.log import Log
from yak_broker.storage.log_config import FlushMode, LogConfig


class GatedFsync:
    """Replaces os.fsync: calls from worker threads block until the test opens the gate."""

    def __init__(self) -> None:
        self.calls = 0
        self.started = threading.Event()
        self.gate = threading.Event()
        self._real = os.fsync

    def __call__(self, fd: int) -> None:
        if threading.current_thread() is threading.main_thread():
            self._real(fd)  # e.g. the leader epoch checkpoint, written on the event loop
            return
        self.calls += 1
        self.started.set()
        assert self.gate.wait(10)
        self._real(fd)


def sync_log(tmp_path: Path) -> Log:
    return Log(tmp_path / "t-0", LogConfig(flush_mode=FlushMode.SYNC), FakeClock())


async def test_async_mode_acknowledges_without_fsync(tmp_path: Path) -> None:
    committer = GroupCommitter(Log(tmp_path / "t-0", LogConfig(), FakeClock()))
    info = await committer.append(make_batch(2), 0)
    assert info.last_offset == 1
    assert committer.fsyncs == 0
    assert committer.log.recovery_point == 0
    await committer.flush()
    assert committer.log.recovery_point == 2
    committer.log.close()


async def test_sync_append_returns_after_its_fsync(tmp_path: Path) -> None:
    committer = GroupCommitter(sync_log(tmp_path))
    info = await committer.append(make_batch(3), 0)
    assert committer.log.recovery_point >= info.last_offset + 1
    assert committer.fsyncs == 1
    committer.log.close()


async def test_appenders_arriving_during_an_fsync_share_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    committer = GroupCommitter(sync_log(tmp_path))
    fsync = GatedFsync()
    monkeypatch.setattr(os, "fsync", fsync)
    first = asyncio.create_task(committer.append(make_batch(1), 0))
    await asyncio.to_thread(fsync.started.wait, 10)  # round 1 is in its fsync
    rest = [asyncio.create_task(committer.append(make_batch(1), 0)) for _ in range(10)]
    await asyncio.sleep(0)
    assert not any(task.done() for task in [first, *rest])
    fsync.gate.set()
    infos = await asyncio.gather(first, *rest)
    assert [i.first_offset for i in infos] == list(range(11))
    assert committer.fsyncs == 2  # one for the first append, one shared by the other ten
    assert committer.log.recovery_point == 11
    committer.log.close()


async def test_fsync_failure_fails_the_waiting_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    committer = GroupCommitter(sync_log(tmp_path))

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError, match="Input/output"):
        await committer.append(make_batch(1), 0)
    assert committer.log.recovery_point == 0
    monkeypatch.undo()
    committer.log.close()


async def test_truncation_fails_appends_waiting_for_lost_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    committer = GroupCommitter(sync_log(tmp_path))
    await committer.append(make_batch(2), 0)  # offsets 0-1, durable
    fsync = GatedFsync()
    monkeypatch.setattr(os, "fsync", fsync)
    kept = asyncio.create_task(committer.append(make_batch(1), 0))  # offset 2
    await asyncio.to_thread(fsync.started.wait, 10)
    lost = asyncio.create_task(committer.append(make_batch(1), 0))  # offset 3, next round
    await asyncio.sleep(0)
    assert committer.truncate_to(3)
    fsync.gate.set()
    assert (await kept).first_offset == 2
    with pytest.raises(NotLeaderOrFollowerError):
        await lost
    assert committer.log.log_end_offset == 3
    await committer.close()
    committer.log.close()
