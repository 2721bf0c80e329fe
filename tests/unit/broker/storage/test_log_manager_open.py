"""Tests for LogManager.open (yak_broker.storage.log_manager) over many partition folders:
every log loaded as a lone ``Log`` would load it, after a clean and an unclean stop; the folder
fsyncs of clean-shutdown logs run on the I/O threads and are all done when ``open`` returns; a
log or an fsync that fails fails ``open`` and leaves the folder unlocked (issue 19)."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.unit.broker.storage.batches import make_batch
from yak.clock import FakeClock
from yak.record.batch import decode_batches, encode_batch
from yak.record.record import RecordInput
from yak.types import TopicPartition
from yak_broker.storage import checkpoint
from yak_broker.storage.log import FetchIsolation, Log
from yak_broker.storage.log_cleaner import Cleaner
from yak_broker.storage.log_config import CleanupPolicy, LogConfig
from yak_broker.storage.log_manager import LogDirLockedError, LogManager

T0 = 1_700_000_000_000
#: Two or three batches per segment: most logs get several segments.
CONFIG = LogConfig(segment_bytes=500)
PARTITIONS = [TopicPartition(topic, p) for topic in ("orders", "payments") for p in range(12)]


def fill(directory: Path, n: int, *, clean: bool) -> None:
    """A log of ``n``-dependent shape: segments, leader epochs, idempotent producers, a high
    watermark; closed cleanly or as a crash leaves it."""
    log = Log(directory, CONFIG, FakeClock(T0))
    for i in range(n % 7 + 1):
        epoch = i // 3
        if i % 2:
            pid, seq = 1000 + n, (i // 2) * 2
            batch = make_batch(2, 120, producer_id=pid, producer_epoch=0, base_sequence=seq)
            log.append(batch, epoch)
        else:
            log.append(make_batch(1, 150 + n), epoch)
    log.update_high_watermark(log.log_end_offset - n % 2)
    if n % 3 == 0:
        log.flush()
    if clean:
        log.close()
    else:
        log.close_without_marker()


def make_folder(data: Path, *, clean: bool) -> None:
    for n, tp in enumerate(PARTITIONS):
        fill(data / tp.dir_name, n, clean=clean)


def state_of(log: Log) -> tuple[Any, ...]:
    return (
        log.log_start_offset,
        log.log_end_offset,
        log.high_watermark,
        log.recovery_point,
        [segment.base_offset for segment in log.segments],
        log.leader_epochs.entries,
        dict(log.producers.producers),
        log.producers.map_end_offset,
        log.had_clean_shutdown,
        log.recovered_truncated_bytes,
    )


def lone_loads(data: Path) -> Iterator[tuple[TopicPartition, tuple[Any, ...]]]:
    """Each partition of ``data`` loaded as a lone ``Log`` (the reference)."""
    for tp in PARTITIONS:
        log = Log(data / tp.dir_name, CONFIG, FakeClock(T0))
        yield tp, state_of(log)
        log.close_without_marker()


def log_io_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("log-io")]


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
async def test_open_loads_every_log_as_a_lone_load_does(tmp_path: Path, clean: bool) -> None:
    make_folder(tmp_path / "data", clean=clean)
    if not clean:  # and a torn write at the end of one log
        torn = tmp_path / "data" / "orders-5"
        active = max(torn.glob("*.log"))
        active.write_bytes(active.read_bytes() + b"\x00\x00\x00\x00\x00\x00\x00\x09torn")
    shutil.copytree(tmp_path / "data", tmp_path / "reference")
    expected = dict(lone_loads(tmp_path / "reference"))
    manager = LogManager(tmp_path / "data", clock=FakeClock(T0), default_config=CONFIG)
    manager.open()
    assert set(manager.logs) == set(PARTITIONS)
    for tp, committer in manager.logs.items():
        assert state_of(committer.log) == expected[tp], tp
        assert committer.log.had_clean_shutdown is clean
    if not clean:
        assert manager.get(TopicPartition("orders", 5)).log.recovered_truncated_bytes == 12
    for committer in manager.logs.values():  # and they take appends where they ended
        end = committer.log.log_end_offset
        assert (await committer.append(make_batch(1), 9)).first_offset == end
    await manager.shutdown()


async def test_the_folder_fsyncs_of_a_clean_start_run_on_the_io_threads_before_open_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_folder(tmp_path, clean=True)
    real_fsync_dir = checkpoint.fsync_dir
    done: list[tuple[str, str]] = []
    lock = threading.Lock()

    def slow_fsync_dir(directory: Path) -> None:
        threading.Event().wait(0.002)  # a slow disk: open must wait for the last of them
        real_fsync_dir(directory)
        with lock:
            done.append((directory.name, threading.current_thread().name))

    monkeypatch.setattr(checkpoint, "fsync_dir", slow_fsync_dir)
    manager = LogManager(tmp_path, clock=FakeClock(T0), default_config=CONFIG)
    manager.open()
    assert sorted(name for name, _ in done) == sorted(tp.dir_name for tp in PARTITIONS)
    assert all(thread.startswith("log-io") for _, thread in done)
    assert not any((tmp_path / tp.dir_name / ".clean-shutdown").exists() for tp in PARTITIONS)
    await manager.shutdown()
    assert log_io_threads() == []


async def test_a_log_that_fails_to_load_fails_open_and_unlocks_the_folder(tmp_path: Path) -> None:
    make_folder(tmp_path, clean=True)
    bad = tmp_path / "orders-7" / "00000000000000000000.log"
    bad.unlink()
    bad.mkdir()  # the segment cannot be opened
    manager = LogManager(tmp_path, clock=FakeClock(T0), default_config=CONFIG)
    with pytest.raises(IsADirectoryError):
        manager.open()
    assert not manager.logs
    assert manager.files.open_count == 0
    assert log_io_threads() == []
    shutil.rmtree(tmp_path / "orders-7")
    again = LogManager(tmp_path, clock=FakeClock(T0), default_config=CONFIG)
    again.open()  # not LogDirLockedError: the failed open released the folder
    assert len(again.logs) == len(PARTITIONS) - 1
    await again.shutdown()


async def test_a_failed_folder_fsync_fails_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_folder(tmp_path, clean=True)
    real_fsync_dir = checkpoint.fsync_dir

    def failing_fsync_dir(directory: Path) -> None:
        if directory.name == "payments-3":
            raise OSError(5, "Input/output error")
        real_fsync_dir(directory)

    monkeypatch.setattr(checkpoint, "fsync_dir", failing_fsync_dir)
    manager = LogManager(tmp_path, clock=FakeClock(T0), default_config=CONFIG)
    with pytest.raises(OSError, match="Input/output error"):
        manager.open()
    assert not manager.logs
    assert manager.files.open_count == 0
    assert log_io_threads() == []
    monkeypatch.setattr(checkpoint, "fsync_dir", real_fsync_dir)
    again = LogManager(tmp_path, clock=FakeClock(T0), default_config=CONFIG)
    again.open()  # not LogDirLockedError
    assert len(again.logs) == len(PARTITIONS)
    with pytest.raises(LogDirLockedError):  # as a manager that did open holds it
        LogManager(tmp_path).open()
    await again.shutdown()


def keyed(key: str, value: str) -> bytes:
    return encode_batch([RecordInput(key.encode(), value.encode(), (), T0)], now_ms=T0)


def values_of(log: Log) -> dict[bytes | None, bytes | None]:
    values: dict[bytes | None, bytes | None] = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        fetched = log.read(offset, 100_000, FetchIsolation.LOG_END)
        for batch in decode_batches(fetched.records):
            for record in batch.records:
                values[record.key] = record.value
        offset = fetched.next_offset
    return values


async def test_open_finishes_an_interrupted_compaction_and_removes_its_leftovers(
    tmp_path: Path,
) -> None:
    config = LogConfig(cleanup_policy=CleanupPolicy.COMPACT, segment_bytes=400)
    directory = tmp_path / "t-0"
    log = Log(directory, config, FakeClock(T0))
    for i in range(12):
        log.append(keyed(f"k{i % 3}", f"v{i}"), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 5, 10]
    log.update_high_watermark(log.log_end_offset)
    before = values_of(log)
    log.close()
    # A clean of segments 0 and 5 that crashed after its swap file was complete.
    result = Cleaner().clean(directory, [0, 5], 10, 0, {}, T0 + 1000, complete=False)
    assert result.swaps
    (directory / "00000000000000000007.index.swap").write_bytes(b"foreign")
    (directory / "00000000000000000010.log.cleaned").write_bytes(b"torn")
    manager = LogManager(tmp_path, clock=FakeClock(T0), default_config=config)
    manager.open()
    loaded = manager.get(TopicPartition("t", 0)).log
    assert [s.base_offset for s in loaded.segments] == [0, 10]
    assert values_of(loaded) == before
    assert loaded.log_end_offset == 12
    names = [p.name for p in directory.iterdir()]
    assert not [n for n in names if n.endswith((".swap", ".cleaned"))]
    await manager.shutdown()
