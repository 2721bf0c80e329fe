"""Tests for yak_broker.storage.log_manager: loading, locking, background work, shutdown."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.unit.broker.storage.batches import make_batch
from yak.clock import FakeClock
from yak.errors import UnknownTopicOrPartitionError
from yak.types import TopicPartition
from yak_broker.storage.log import Log
from yak_broker.storage.log_config import CleanupPolicy, LogConfig
from yak_broker.storage.log_manager import LogDirLockedError, LogManager

T0 = 1_700_000_000_000


async def settle() -> None:
    """Let woken background tasks run to their next await (no wall-clock time passes)."""
    for _ in range(20):
        await asyncio.sleep(0)


def test_topic_partition_folder_names() -> None:
    assert TopicPartition("my-topic", 3).dir_name == "my-topic-3"
    assert TopicPartition.parse("my-topic-3") == ("my-topic", 3)
    assert TopicPartition.parse("topic") is None
    assert TopicPartition.parse("-3") is None
    assert TopicPartition.parse("t-x") is None


async def test_create_append_shutdown_and_reload(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, clock=FakeClock(T0))
    manager.open()
    committer = manager.get_or_create(TopicPartition("orders", 0))
    await committer.append(make_batch(3), 0)
    manager.get_or_create(TopicPartition("orders", 1))
    with pytest.raises(UnknownTopicOrPartitionError):
        manager.get(TopicPartition("orders", 2))
    await manager.shutdown()
    assert (tmp_path / "orders-0" / ".clean-shutdown").exists()

    again = LogManager(tmp_path, clock=FakeClock(T0))
    again.open()
    assert set(again.logs) == {TopicPartition("orders", 0), TopicPartition("orders", 1)}
    log = again.get(TopicPartition("orders", 0)).log
    assert log.had_clean_shutdown
    assert log.log_end_offset == 3
    await again.shutdown()


async def test_a_second_manager_on_the_same_folder_fails(tmp_path: Path) -> None:
    first = LogManager(tmp_path)
    first.open()
    second = LogManager(tmp_path)
    with pytest.raises(LogDirLockedError, match="in use"):
        second.open()
    await first.shutdown()
    second.open()  # released by the shutdown
    await second.shutdown()


async def test_per_topic_configs(tmp_path: Path) -> None:
    configs = {"small": LogConfig(segment_bytes=1000)}
    manager = LogManager(tmp_path, topic_config=configs.get)
    manager.open()
    assert manager.get_or_create(TopicPartition("small", 0)).log.config.segment_bytes == 1000
    assert manager.get_or_create(TopicPartition("big", 0)).log.config == LogConfig()
    await manager.shutdown()


async def test_delete_removes_the_folder(tmp_path: Path) -> None:
    manager = LogManager(tmp_path)
    manager.open()
    tp = TopicPartition("gone", 0)
    await manager.get_or_create(tp).append(make_batch(1), 0)
    await manager.delete(tp)
    assert tp not in manager.logs
    assert os.listdir(tmp_path) == [".lock"]
    await manager.shutdown()


async def test_leftover_deletions_are_finished_at_start(tmp_path: Path) -> None:
    (tmp_path / "old-0.abc-delete").mkdir()
    (tmp_path / "old-0.abc-delete" / "00000000000000000000.log").write_bytes(b"x")
    manager = LogManager(tmp_path)
    manager.open()
    assert not (tmp_path / "old-0.abc-delete").exists()
    assert not manager.logs
    await manager.shutdown()


async def test_background_retention_runs_on_the_clock(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    config = LogConfig(segment_bytes=300, retention_ms=1000)
    manager = LogManager(
        tmp_path, clock=clock, default_config=config, retention_check_interval_ms=5000
    )
    await manager.start()
    await settle()  # the tasks reach their first clock.sleep
    log = manager.get_or_create(TopicPartition("t", 0)).log
    for _ in range(4):
        log.append(make_batch(1, 150, timestamp=T0), 0)
    log.update_high_watermark(4)
    clock.advance(4.9)
    await settle()
    before = len(log.segments)
    clock.advance(0.1)
    await settle()
    assert (before, len(log.segments)) == (4, 1)
    assert log.log_start_offset == 3
    await manager.shutdown()


async def test_background_checkpoints_and_flushes(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    manager = LogManager(
        tmp_path,
        clock=clock,
        default_config=LogConfig(flush_ms=1000),
        checkpoint_interval_ms=2000,
    )
    manager.open()
    committer = manager.get_or_create(TopicPartition("t", 0))
    await committer.append(make_batch(2), 0)
    committer.log.update_high_watermark(2)
    await manager.flush_due_logs()
    assert committer.log.recovery_point == 0  # flush.ms not yet elapsed
    clock.advance(1.0)
    await manager.flush_due_logs()
    assert committer.log.recovery_point == 2
    await manager.write_checkpoints()
    text = (tmp_path / "t-0" / "partition.checkpoint").read_text()
    assert "recovery_point 2\n" in text
    assert "high_watermark 2\n" in text
    await manager.shutdown()


async def test_only_partitions_whose_offsets_moved_write_a_checkpoint(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, clock=FakeClock(T0))
    manager.open()
    logs = [manager.get_or_create(TopicPartition("t", p)) for p in range(150)]  # > 2 chunks
    files = [tmp_path / f"t-{p}" / "partition.checkpoint" for p in range(150)]
    # A new log's offsets are all 0, which is what an absent checkpoint means: none written.
    await manager.write_checkpoints()
    assert not any(file.exists() for file in files)
    for p in (3, 7):
        await logs[p].append(make_batch(2), 0)
        logs[p].log.update_high_watermark(2)
    await manager.write_checkpoints()
    assert [p for p, file in enumerate(files) if file.exists()] == [3, 7]
    os.utime(files[3], ns=(0, 0))
    os.utime(files[7], ns=(0, 0))
    logs[7].log.update_high_watermark(1)
    await manager.write_checkpoints()
    rewritten = [p for p, file in enumerate(files) if file.exists() and file.stat().st_mtime_ns]
    assert rewritten == [7]
    assert "high_watermark 1\n" in files[7].read_text()
    assert logs[7].log.write_checkpoint() is False  # nothing moved since
    await manager.shutdown()


async def test_cleaner_runs_for_compacted_topics_only(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    cleaned: list[str] = []

    async def cleaner(log: Log) -> None:
        cleaned.append(log.directory.name)

    configs = {"compacted": LogConfig(cleanup_policy=CleanupPolicy.COMPACT)}
    manager = LogManager(
        tmp_path, clock=clock, topic_config=configs.get, cleaner=cleaner, cleaner_interval_ms=100
    )
    await manager.start()
    await settle()  # the tasks reach their first clock.sleep
    manager.get_or_create(TopicPartition("compacted", 0))
    manager.get_or_create(TopicPartition("plain", 0))
    clock.advance(0.1)
    await settle()
    assert cleaned == ["compacted-0"]
    await manager.shutdown()


# --- dirty sets: periodic work proportional to what changed ---------------------------------


class Visits:
    """Counts the calls of a ``Log`` method, by partition folder; ``called`` is set by the
    first."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
        self.seen: list[str] = []
        self.called = asyncio.Event()
        original = getattr(Log, name)

        def counting(log: Log, *args: object, **kwargs: object) -> object:
            self.seen.append(log.directory.name)
            self.called.set()
            return original(log, *args, **kwargs)

        monkeypatch.setattr(Log, name, counting)

    def take(self) -> list[str]:
        seen, self.seen = self.seen, []
        return sorted(seen)


async def test_the_flush_task_visits_only_logs_with_unflushed_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock(T0)
    manager = LogManager(tmp_path, clock=clock, default_config=LogConfig(flush_ms=1000))
    manager.open()
    logs = [manager.get_or_create(TopicPartition("t", p)) for p in range(150)]  # > 2 chunks
    visits = Visits(monkeypatch, "flush_due")
    await manager.flush_due_logs()
    assert visits.take() == []
    await logs[3].append(make_batch(2), 0)
    await logs[100].append_as_follower(make_batch(2, epoch=0))
    await manager.flush_due_logs()  # flush.ms not yet elapsed: visited, kept, not flushed
    assert visits.take() == ["t-100", "t-3"]
    assert (logs[3].log.recovery_point, logs[100].log.recovery_point) == (0, 0)
    clock.advance(1.0)
    await manager.flush_due_logs()
    assert visits.take() == ["t-100", "t-3"]
    assert (logs[3].log.recovery_point, logs[100].log.recovery_point) == (2, 2)
    await manager.flush_due_logs()  # both flushed: they left the set
    assert visits.take() == []
    await logs[3].append(make_batch(1), 0)  # dirty again
    clock.advance(1.0)
    await manager.flush_due_logs()
    assert visits.take() == ["t-3"]
    assert logs[3].log.recovery_point == 3
    await manager.shutdown()


async def test_a_rolled_segment_is_flushed_before_flush_ms(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    config = LogConfig(flush_ms=60_000, segment_bytes=300)
    manager = LogManager(tmp_path, clock=clock, default_config=config)
    manager.open()
    committer = manager.get_or_create(TopicPartition("t", 0))
    for _ in range(3):
        await committer.append(make_batch(1, 150), 0)
    assert len(committer.log.segments) == 3
    await manager.flush_due_logs()
    assert committer.log.recovery_point == 3
    await manager.shutdown()


async def test_a_log_flushed_meanwhile_leaves_the_set_without_another_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LogManager(tmp_path, clock=FakeClock(T0))
    manager.open()
    committer = manager.get_or_create(TopicPartition("t", 0))
    await committer.append(make_batch(1), 0)
    committer.log.flush()  # e.g. flush.messages, or a group commit in sync mode
    flushes = Visits(monkeypatch, "prepare_flush")
    visits = Visits(monkeypatch, "flush_due")
    await manager.flush_due_logs()
    assert (visits.take(), flushes.take()) == (["t-0"], [])
    await manager.flush_due_logs()
    assert visits.take() == []
    await manager.shutdown()


async def test_a_deleted_log_leaves_the_dirty_sets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock(T0)
    manager = LogManager(tmp_path, clock=clock, default_config=LogConfig(flush_ms=1000))
    manager.open()
    tp = TopicPartition("gone", 0)
    committer = manager.get_or_create(tp)
    await committer.append(make_batch(2), 0)
    committer.log.update_high_watermark(2)
    await manager.delete(tp)
    flush_visits = Visits(monkeypatch, "flush_due")
    checkpoint_visits = Visits(monkeypatch, "write_checkpoint")
    clock.advance(1.0)
    await manager.flush_due_logs()
    await manager.write_checkpoints()
    assert (flush_visits.take(), checkpoint_visits.take()) == ([], [])
    again = manager.get_or_create(tp)  # a new log under the old name starts clean
    await manager.flush_due_logs()
    assert flush_visits.take() == []
    await again.append(make_batch(1), 0)
    await manager.flush_due_logs()
    assert flush_visits.take() == ["gone-0"]
    await manager.shutdown()


async def test_a_log_deleted_during_a_flush_pass_is_not_visited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock(T0)
    manager = LogManager(tmp_path, clock=clock, default_config=LogConfig(flush_ms=1000))
    manager.open()
    committers = [manager.get_or_create(TopicPartition("t", p)) for p in range(70)]
    for committer in committers:
        await committer.append(make_batch(1), 0)
    clock.advance(1.0)
    visits = Visits(monkeypatch, "flush_due")
    flush_pass = asyncio.create_task(manager.flush_due_logs())
    await visits.called.wait()  # the pass is under way: it flushes the first log
    await manager.delete(TopicPartition("t", 69))
    await flush_pass
    assert "t-69" not in visits.take()
    assert all(c.log.recovery_point == 1 for c in committers[:69])
    await manager.shutdown()


async def test_a_log_recovered_with_unflushed_data_is_flushed_by_the_task(
    tmp_path: Path,
) -> None:
    clock = FakeClock(T0)
    log = Log.open(tmp_path / "t-0", LogConfig(), clock)
    log.append(make_batch(3), 0)
    log.close_without_marker()  # a crash: nothing flushed, no checkpoint
    manager = LogManager(tmp_path, clock=clock, default_config=LogConfig(flush_ms=1000))
    manager.open()
    recovered = manager.get(TopicPartition("t", 0)).log
    assert (recovered.recovery_point, recovered.log_end_offset) == (0, 3)
    clock.advance(1.0)
    await manager.flush_due_logs()
    assert recovered.recovery_point == 3
    await manager.shutdown()


async def test_the_checkpoint_task_visits_only_logs_whose_offsets_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock(T0)
    manager = LogManager(tmp_path, clock=clock, default_config=LogConfig(flush_ms=1000))
    manager.open()
    logs = [manager.get_or_create(TopicPartition("t", p)) for p in range(150)]
    visits = Visits(monkeypatch, "write_checkpoint")
    await manager.write_checkpoints()
    assert visits.take() == []
    await logs[5].append(make_batch(2), 0)
    logs[9].log.update_high_watermark(0)  # did not move
    await manager.write_checkpoints()
    assert visits.take() == []  # unflushed data alone moves no checkpointed offset
    clock.advance(1.0)
    await manager.flush_due_logs()  # moves the recovery point of t-5
    await manager.write_checkpoints()
    assert visits.take() == ["t-5"]
    assert "recovery_point 2\n" in (tmp_path / "t-5" / "partition.checkpoint").read_text()
    logs[5].log.update_high_watermark(1)
    logs[140].log.update_high_watermark(0)
    await manager.write_checkpoints()
    assert visits.take() == ["t-5"]
    await manager.write_checkpoints()
    assert visits.take() == []
    await manager.shutdown()
