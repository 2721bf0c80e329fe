"""Tests for yak_broker.storage.log_creation and LogManager.create_logs: many new logs at once,
off the event loop — exactly the logs asked for, errors per log, crash leftovers."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.unit.broker.storage.batches import make_batch
from yak.clock import FakeClock
from yak.heap import HeapFreezer
from yak.types import TopicPartition
from yak_broker.storage import log_creation
from yak_broker.storage.leader_epoch_cache import LEADER_EPOCH_CHECKPOINT_FILE_NAME, EpochEntry
from yak_broker.storage.log_config import LogConfig
from yak_broker.storage.log_creation import NewLog
from yak_broker.storage.log_info import FetchIsolation
from yak_broker.storage.log_manager import LogManager, LogRequest

T0 = 1_700_000_000_000
SEGMENT_FILES = {
    "00000000000000000000.log",
    "00000000000000000000.index",
    "00000000000000000000.timeindex",
}


def _requests(count: int, leader_every: int = 3) -> list[LogRequest]:
    return [
        LogRequest(
            TopicPartition("t", p),
            LogConfig(),
            (("partition.metadata", f"id-{p}".encode()),),
            7 if p % leader_every == 0 else None,
        )
        for p in range(count)
    ]


def _listing(data_dir: Path) -> set[str]:
    return {path.name for path in data_dir.iterdir() if path.name != ".lock"}


async def test_creates_exactly_the_logs_asked_for(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, clock=FakeClock(T0))
    manager.open()
    created = await manager.create_logs(_requests(10))
    assert set(created) == {TopicPartition("t", p) for p in range(10)}
    assert _listing(tmp_path) == {f"t-{p}" for p in range(10)}  # no staging folder left
    for p in range(10):
        folder = tmp_path / f"t-{p}"
        leader = p % 3 == 0
        expected = SEGMENT_FILES | {"partition.metadata"}
        assert {f.name for f in folder.iterdir()} == (
            expected | {LEADER_EPOCH_CHECKPOINT_FILE_NAME} if leader else expected
        )
        assert (folder / "partition.metadata").read_bytes() == f"id-{p}".encode()
        log = manager.get(TopicPartition("t", p)).log
        assert created[TopicPartition("t", p)] is manager.get(TopicPartition("t", p))
        assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (0, 0, 0)
        assert log.leader_epochs.entries == ((EpochEntry(7, 0),) if leader else ())
    # The new logs take appends and reads like any other.
    committer = manager.get(TopicPartition("t", 1))
    await committer.append(make_batch(3), 0)
    committer.log.update_high_watermark(3)
    assert committer.log.read(0, 1 << 20).records.nbytes > 0
    await manager.shutdown()


async def test_registering_opens_no_file_and_writes_no_checkpoint(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, clock=FakeClock(T0))
    manager.open()
    await manager.create_logs(_requests(5))
    assert manager.files.open_count == 0  # opened on first use
    assert not any((tmp_path / f"t-{p}" / "partition.checkpoint").exists() for p in range(5))
    # Nothing moved: the periodic checkpoint pass writes nothing either.
    await manager.write_checkpoints()
    assert not any((tmp_path / f"t-{p}" / "partition.checkpoint").exists() for p in range(5))
    await manager.shutdown()


@pytest.mark.parametrize("clean", [True, False])
async def test_created_logs_load_like_logs_created_one_by_one(tmp_path: Path, clean: bool) -> None:
    bulk, single = tmp_path / "bulk", tmp_path / "single"
    for folder in (bulk, single):
        manager = LogManager(folder, clock=FakeClock(T0))
        manager.open()
        if folder == bulk:
            await manager.create_logs(
                [LogRequest(TopicPartition("t", p), LogConfig()) for p in (0, 1)]
            )
        else:
            for p in (0, 1):
                manager.get_or_create(TopicPartition("t", p))
        for p in (0, 1):
            committer = manager.get(TopicPartition("t", p))
            committer.log.assign_epoch(3, 0)
            await committer.append(make_batch(4 + p), 3)
            committer.log.update_high_watermark(2)
        if clean:
            await manager.shutdown()
        else:  # as a kill -9 leaves it
            for committer in manager.logs.values():
                committer.log.close_without_marker()
            manager._unlock()
    loaded = []
    for folder in (bulk, single):
        manager = LogManager(folder, clock=FakeClock(T0))
        manager.open()
        loaded.append(
            {
                tp: (
                    c.log.log_end_offset,
                    c.log.high_watermark if clean else None,
                    c.log.leader_epochs.entries,
                    bytes(c.log.read(0, 1 << 20, FetchIsolation.LOG_END).records),
                )
                for tp, c in manager.logs.items()
            }
        )
        await manager.shutdown()
    assert loaded[0] == loaded[1]
    assert {tp: v[0] for tp, v in loaded[0].items()} == {
        TopicPartition("t", 0): 4,
        TopicPartition("t", 1): 5,
    }


async def test_a_failing_log_fails_alone(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, clock=FakeClock(T0))
    manager.open()
    requests = _requests(6)
    # A file the staging folder cannot hold: this log's preparation fails midway.
    requests[2] = requests[2]._replace(files=(("partition.metadata", b"x"), ("no/such", b"y")))
    created = await manager.create_logs(requests)
    assert isinstance(created[TopicPartition("t", 2)], FileNotFoundError)
    assert TopicPartition("t", 2) not in manager.logs
    ok = {TopicPartition("t", p) for p in range(6) if p != 2}
    assert set(manager.logs) == ok
    assert _listing(tmp_path) == {tp.dir_name for tp in ok}  # its staging folder is gone
    # Asked again (as the replica manager does at the next change), it is created.
    again = await manager.create_logs([_requests(3)[2]])
    assert not isinstance(again[TopicPartition("t", 2)], Exception)
    await manager.shutdown()


def test_a_failed_rename_fails_that_log_only(tmp_path: Path) -> None:
    staged = [log_creation.prepare(tmp_path, NewLog(f"t-{p}")) for p in range(3)]
    (tmp_path / "t-1").mkdir()  # appeared between prepare and publish
    (tmp_path / "t-1" / "foreign").write_bytes(b"")
    results = log_creation.publish(tmp_path, staged)
    assert results[0] == tmp_path / "t-0"
    assert results[2] == tmp_path / "t-2"
    assert isinstance(results[1], FileExistsError)
    assert {p.name for p in (tmp_path / "t-1").iterdir()} == {"foreign"}  # left alone
    assert _listing(tmp_path) == {"t-0", "t-1", "t-2"}  # no staging folder left


async def test_a_folder_already_on_disk_is_loaded_as_it_is(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, clock=FakeClock(T0))
    manager.open()
    committer = manager.get_or_create(TopicPartition("t", 0))
    await committer.append(make_batch(2), 0)
    await manager.shutdown()
    manager = LogManager(tmp_path, clock=FakeClock(T0))
    manager.open()
    # Not registered (as if its load was skipped), but on disk: adopted, not overwritten.
    manager._logs.pop(TopicPartition("t", 0)).log.close()
    created = await manager.create_logs([LogRequest(TopicPartition("t", 0), LogConfig())])
    log = manager.get(TopicPartition("t", 0)).log
    assert created[TopicPartition("t", 0)] is manager.get(TopicPartition("t", 0))
    assert log.log_end_offset == 2
    await manager.shutdown()


async def test_staging_leftovers_are_removed_at_open(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, clock=FakeClock(T0))
    manager.open()
    await manager.shutdown()
    log_creation.prepare(tmp_path, NewLog("t-0", (("partition.metadata", b"id"),), 2))
    [(published)] = log_creation.publish(
        tmp_path, [log_creation.prepare(tmp_path, NewLog("t-1", (("partition.metadata", b"i"),)))]
    )
    assert published == tmp_path / "t-1"  # renamed into place, never registered (a crash)
    manager = LogManager(tmp_path, clock=FakeClock(T0))
    manager.open()
    assert _listing(tmp_path) == {"t-1"}
    assert set(manager.logs) == {TopicPartition("t", 1)}
    assert manager.get(TopicPartition("t", 1)).log.log_end_offset == 0
    await manager.shutdown()


_CREATOR = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from yak_broker.storage.log_config import LogConfig
    from yak_broker.storage.log_manager import LogManager, LogRequest
    from yak.types import TopicPartition

    async def main() -> None:
        manager = LogManager(Path(sys.argv[1]))
        manager.open()
        batch = 0
        while True:  # until killed
            requests = [
                LogRequest(
                    TopicPartition(f"t{batch}", p),
                    LogConfig(),
                    (("partition.metadata", f"id-{batch}".encode()),),
                    1 if p % 2 else None,
                )
                for p in range(50)
            ]
            await manager.create_logs(requests)
            print(batch, flush=True)
            batch += 1

    asyncio.run(main())
    """
)


def _kill_during_creation(data: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _CREATOR, str(data)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert process.stdout is not None
        for _ in range(3):  # a few batches done, then killed in the middle of the next
            assert process.stdout.readline()
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _folder_files(folder: Path) -> set[str]:
    return {f.name for f in folder.iterdir()}


async def test_a_kill_during_bulk_creation_recovers(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await asyncio.to_thread(_kill_during_creation, data)
    manager = LogManager(data, clock=FakeClock(T0))
    manager.open()
    assert _listing(data) == {tp.dir_name for tp in manager.logs}  # no staging folder left
    assert len(manager.logs) >= 150
    for tp, committer in manager.logs.items():
        folder = committer.log.directory
        # Every folder that appeared is whole: its topic id and its segment. (The leader epoch
        # stamped at offset 0 of a log still empty is dropped by the unclean load, as the
        # loader drops any epoch starting at the log end: KIP-101.)
        assert (folder / "partition.metadata").read_bytes() == f"id-{tp.topic[1:]}".encode()
        assert _folder_files(folder) >= SEGMENT_FILES
        assert committer.log.log_end_offset == 0
        assert committer.log.leader_epochs.entries == ()
    await manager.shutdown()


class _Heap(HeapFreezer):
    """Records what the log manager tells it (and freezes nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.told: list[str] = []

    def grew(self) -> None:
        self.told.append("grew")

    def shrank(self) -> None:
        self.told.append("shrank")


async def test_the_heap_hears_of_logs_loaded_created_and_deleted(tmp_path: Path) -> None:
    first = LogManager(tmp_path, clock=FakeClock(T0), heap=(heap := _Heap()), freeze_from_logs=3)
    first.open()
    await first.create_logs(_requests(3))
    await first.create_logs(_requests(3))  # nothing new: nothing to freeze
    await first.delete(TopicPartition("t", 0))
    assert heap.told == ["grew", "shrank"]
    await first.shutdown()
    again = LogManager(
        tmp_path, clock=FakeClock(T0), heap=(reloaded := _Heap()), freeze_from_logs=2
    )
    await again.start()
    assert reloaded.told == ["grew"]  # the logs found at start
    await again.shutdown()


async def test_a_small_broker_leaves_its_heap_alone(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, clock=FakeClock(T0), heap=(heap := _Heap()), freeze_from_logs=4)
    manager.open()
    await manager.create_logs(_requests(3))
    assert heap.told == []  # a few logs: a full collection is short, nothing to freeze
    await manager.create_logs(_requests(5))
    assert heap.told == ["grew"]
    await manager.shutdown()


def test_side_names_fit_a_file_name_whatever_the_topic() -> None:
    longest = "t" * 249  # a legal topic name: its folder fits, id and suffix on top would not
    name = log_creation.side_name(f"{longest}-99999", log_creation.CREATE_SUFFIX)
    assert len(name.encode()) == log_creation.NAME_MAX
    assert name.startswith("t" * 200)
    assert name.endswith(log_creation.CREATE_SUFFIX)
    assert "-99999." in name
    short = log_creation.side_name("jobs-3", "-delete")
    assert short.startswith("jobs-3.")
    assert short.endswith("-delete")
    assert len(short) == len("jobs-3.") + 32 + len("-delete")


async def test_a_topic_of_the_longest_legal_name_is_created_and_deleted(tmp_path: Path) -> None:
    """Its staging and delete folders would pass 255 bytes with the whole topic in them."""
    manager = LogManager(tmp_path, clock=FakeClock(T0))
    manager.open()
    tp = TopicPartition("x" * 249, 12_345)
    created = await manager.create_logs([LogRequest(tp, LogConfig(), (), 0)])
    assert set(created) == {tp}
    assert _listing(tmp_path) == {tp.dir_name}
    await manager.get(tp).append(make_batch(2), 0)
    await manager.delete(tp)
    assert _listing(tmp_path) == set()
    await manager.shutdown()
