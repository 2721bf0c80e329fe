"""Tests for yak_broker.storage.file_handles: a bounded LRU of segment and index descriptors,
and the logs that open their files through it (issue 19)."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from tests.unit.broker.storage.batches import make_batch
from yak.clock import FakeClock
from yak.record.batch import decode_batches, encode_batch
from yak.record.record import RecordInput
from yak.types import TopicPartition
from yak_broker.storage.compaction import compact
from yak_broker.storage.file_handles import FileHandleCache, default_max_open_files
from yak_broker.storage.group_commit import GroupCommitter
from yak_broker.storage.log import FetchIsolation, Log
from yak_broker.storage.log_config import CleanupPolicy, FlushMode, LogConfig
from yak_broker.storage.log_manager import LogManager

T0 = 1_700_000_000_000
#: Three batches of ~190 bytes per segment, so every partition gets several segments.
SMALL_SEGMENTS = LogConfig(segment_bytes=600)
#: The process's descriptors besides the cache's: the manager's lock, the listing of
#: /proc/self/fd itself, and one spare for a checkpoint being written.
MARGIN = 3


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def fd_is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


# --- the cache -----------------------------------------------------------------------------


def test_the_least_recently_used_descriptor_is_closed_first(tmp_path: Path) -> None:
    cache = FileHandleCache(2)
    a, b = cache.open(tmp_path / "a"), cache.open(tmp_path / "b")
    fd_a = a.fd()
    b.fd()
    a.fd()  # a is now the most recently used
    c = cache.open(tmp_path / "c")
    assert (a.is_open, b.is_open, c.is_open) == (True, False, True)
    assert cache.open_count == 2
    assert cache.evictions == 1
    assert a.fd() == fd_a  # kept, not reopened
    os.pwrite(b.fd(), b"hello", 0)  # reopened transparently, evicting c
    assert not c.is_open
    assert cache.open_count == 2
    assert (tmp_path / "b").read_bytes() == b"hello"
    for handle in (a, b, c):
        handle.close()
    assert cache.open_count == 0


def test_an_evicted_descriptor_is_really_closed(tmp_path: Path) -> None:
    cache = FileHandleCache(1)
    first = cache.open(tmp_path / "a")
    fd = first.fd()
    cache.open(tmp_path / "b")
    assert not fd_is_open(fd) or os.fstat(fd).st_ino != (tmp_path / "a").stat().st_ino


def test_a_closed_handle_refuses_and_a_reopen_never_creates(tmp_path: Path) -> None:
    cache = FileHandleCache(1)
    handle = cache.open(tmp_path / "a")
    handle.close()
    assert handle.closed
    with pytest.raises(ValueError, match="closed"):
        handle.fd()
    gone = cache.open(tmp_path / "b")
    cache.open(tmp_path / "c")  # evicts b
    (tmp_path / "b").unlink()
    with pytest.raises(FileNotFoundError):
        gone.fd()
    assert not (tmp_path / "b").exists()


def test_lowering_the_bound_evicts_at_once(tmp_path: Path) -> None:
    cache = FileHandleCache(10)
    handles = [cache.open(tmp_path / str(i)) for i in range(6)]
    cache.max_open = 2
    assert cache.open_count == 2
    assert [h.is_open for h in handles] == [False] * 4 + [True] * 2
    with pytest.raises(ValueError, match=">= 1"):
        cache.max_open = 0


def test_the_default_bound_leaves_half_the_limit_to_sockets() -> None:
    assert default_max_open_files(1024) == 512
    assert default_max_open_files(256) == 128
    assert default_max_open_files(20) == 64
    assert default_max_open_files(524_288) == 4096
    assert default_max_open_files(-1) == 4096  # RLIM_INFINITY


# --- logs behind a tight bound ---------------------------------------------------------------


def payload(partition: int, n: int) -> bytes:
    return f"p{partition}-n{n}-".encode() * 20


async def test_twenty_partitions_behind_eight_descriptors(tmp_path: Path) -> None:
    before = open_fds()
    manager = LogManager(tmp_path, clock=FakeClock(T0), max_open_files=8)
    manager.open()
    peak = 0
    committers = [manager.get_or_create(TopicPartition("t", p), SMALL_SEGMENTS) for p in range(20)]
    for n in range(12):
        for p, committer in enumerate(committers):
            await committer.append(make_batch(1, payload(p, n), timestamp=T0 + n), 0)
            peak = max(peak, open_fds() - before)
    for committer in committers:
        assert len(committer.log.segments) >= 3
        committer.log.update_high_watermark(committer.log.log_end_offset)
    for p, committer in enumerate(committers):
        offset, seen = 0, []
        while offset < committer.log.log_end_offset:  # from the oldest segment on
            fetched = committer.log.read(offset, 1, FetchIsolation.HIGH_WATERMARK)
            seen.append(bytes(fetched.records[61:]))
            offset = fetched.next_offset
            peak = max(peak, open_fds() - before)
        assert seen == [payload(p, n) for n in range(12)]
    await manager.flush_due_logs()
    assert manager.files.open_count <= 8
    assert manager.files.evictions > 0
    assert peak <= 8 + MARGIN
    await manager.shutdown()
    assert open_fds() <= before + 1  # nothing left behind


async def test_the_active_segment_is_not_reopened_per_append(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, clock=FakeClock(T0), max_open_files=8)
    manager.open()
    committer = manager.get_or_create(TopicPartition("t", 0))
    await committer.append(make_batch(1), 0)
    opens = manager.files.opens
    for _ in range(200):
        await committer.append(make_batch(1), 0)
    assert manager.files.opens == opens
    await manager.shutdown()


class GatedFsync:
    """Replaces os.fsync: a worker thread's call blocks until the gate opens, then checks its
    descriptor still names the file it named when the call began."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.gate = threading.Event()
        self.inodes: list[tuple[int, int]] = []
        self._real = os.fsync

    def __call__(self, fd: int) -> None:
        if threading.current_thread() is threading.main_thread():
            self._real(fd)
            return
        inode = os.fstat(fd).st_ino
        self.started.set()
        assert self.gate.wait(10)
        self.inodes.append((inode, os.fstat(fd).st_ino))
        self._real(fd)


async def test_eviction_during_an_in_flight_fsync_is_safe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsync = GatedFsync()
    monkeypatch.setattr(os, "fsync", fsync)
    files = FileHandleCache(2)
    log = Log(tmp_path / "t-0", LogConfig(flush_mode=FlushMode.SYNC), FakeClock(T0), files)
    committer = GroupCommitter(log)
    append = asyncio.create_task(committer.append(make_batch(3), 0))
    assert await asyncio.to_thread(fsync.started.wait, 10)
    # The worker holds the fsync; meanwhile other files take every descriptor of the cache,
    # and reopening them reuses the descriptor numbers the log had.
    others = [files.open(tmp_path / f"other-{i}") for i in range(4)]
    assert log.active_segment.open_files == 0
    for other in others:
        other.fd()
    fsync.gate.set()
    info = await asyncio.wait_for(append, 10)
    assert info.last_offset == 2
    assert log.recovery_point == 3
    assert fsync.inodes
    assert all(before == after for before, after in fsync.inodes)
    log.close()


def test_recovery_through_reopened_files(tmp_path: Path) -> None:
    files = FileHandleCache(2)
    log = Log(tmp_path / "t-0", SMALL_SEGMENTS, FakeClock(T0), files)
    for n in range(10):
        log.append(make_batch(1, payload(0, n), timestamp=T0 + n), 0)
    log.flush()
    log.append(make_batch(1, payload(0, 10), timestamp=T0 + 10), 0)
    tail = log.active_segment.log_path
    log.close_without_marker()  # a crash: no marker, the last append unflushed
    with tail.open("ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x0b\x00\x00")  # a torn batch after it
    again = Log(tmp_path / "t-0", SMALL_SEGMENTS, FakeClock(T0), FileHandleCache(2))
    assert not again.had_clean_shutdown
    assert again.recovered_truncated_bytes == 10
    assert again.log_end_offset == 11
    assert again.active_segment.size == tail.stat().st_size
    first = again.read(0, 1, FetchIsolation.LOG_END)
    assert bytes(first.records[61:]) == payload(0, 0)
    assert again.truncate_to(2)  # into an evicted old segment
    assert again.log_end_offset == 2
    again.close()


def test_retention_deletes_evicted_segments_without_reopening_them(tmp_path: Path) -> None:
    files = FileHandleCache(3)
    config = LogConfig(segment_bytes=600, retention_bytes=600)
    log = Log(tmp_path / "t-0", config, FakeClock(T0), files)
    for n in range(12):
        log.append(make_batch(1, payload(0, n), timestamp=T0 + n), 0)
    log.update_high_watermark(log.log_end_offset)
    old = log.segments[:-1]
    assert len(old) >= 3
    assert not any(s.open_files for s in old[:-1])
    opens = files.opens
    deleted = log.delete_old_segments()
    assert deleted >= 2
    assert files.opens == opens  # deleting a file needs no descriptor
    for segment in old[:deleted]:
        assert segment.closed
        assert not segment.log_path.exists()
    assert files.open_count <= 3
    fetched = log.read(log.log_start_offset, 1, FetchIsolation.HIGH_WATERMARK)
    assert fetched.records
    log.close()


def keyed(key: str, value: str) -> bytes:
    return encode_batch([RecordInput(key.encode(), value.encode(), (), T0)], now_ms=T0)


def test_compaction_swaps_evicted_segments(tmp_path: Path) -> None:
    files = FileHandleCache(3)
    config = LogConfig(
        cleanup_policy=CleanupPolicy.COMPACT, segment_bytes=400, delete_retention_ms=0
    )
    log = Log(tmp_path / "t-0", config, FakeClock(T0), files)
    for i in range(30):
        log.append(keyed(f"k{i % 3}", f"v{i}"), 0)
    log.update_high_watermark(log.log_end_offset)
    before_fds = open_fds()
    assert sum(s.open_files for s in log.segments) <= 3
    result = compact(log, T0)
    assert result is not None
    assert result.swaps
    assert files.open_count <= 3
    assert open_fds() <= before_fds + 1
    values: dict[bytes, bytes | None] = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        fetched = log.read(offset, 100_000, FetchIsolation.LOG_END)
        for batch in decode_batches(fetched.records):
            for record in batch.records:
                assert record.key is not None
                values[record.key] = record.value
        offset = fetched.next_offset
    assert values == {b"k0": b"v27", b"k1": b"v28", b"k2": b"v29"}
    log.close()
    again = Log(tmp_path / "t-0", config, FakeClock(T0), FileHandleCache(3))
    assert again.log_end_offset == 30
    again.close()
