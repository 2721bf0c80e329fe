"""The replica manager creates new replicas' logs in bulk (issue 19): each folder with its topic
id and, where this broker leads, its leader epoch; a log that fails to be created fails its
partition alone, which is created at the next metadata change."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from tests.unit.broker.broker_harness import BrokerHarness
from yak.errors import NotLeaderOrFollowerError
from yak.metadata.models import PartitionState, TopicRecord
from yak.record import RecordInput, encode_batch
from yak.types import TopicPartition
from yak_broker.replication.partition_metadata import read_topic_id
from yak_broker.replication.state.replica_plan import DesiredReplica
from yak_broker.storage import checkpoint, log_creation
from yak_broker.storage.leader_epoch_cache import (
    LEADER_EPOCH_CHECKPOINT_FILE_NAME,
    EpochEntry,
    LeaderEpochCache,
)
from yak_broker.storage.log_creation import NewLog, StagedLog


async def test_a_topic_s_replicas_are_created_with_their_ids_and_epochs(
    broker: BrokerHarness,
) -> None:
    topic_id = await broker.create_topic("many", partitions=20, leader_epoch=4)
    replicas = broker.broker.replicas.replicas
    assert set(replicas) == {TopicPartition("many", p) for p in range(20)}
    for p in range(20):
        log = replicas[TopicPartition("many", p)].log
        assert read_topic_id(log.directory) == topic_id
        assert log.leader_epochs.entries == (EpochEntry(4, 0),)
    batch = bytes(encode_batch([RecordInput(value=b"v")]))
    assert (await broker.client.produce_one("many", 7, batch)).base_offset == 0


async def test_a_follower_s_log_has_no_epoch_until_it_fetches(broker: BrokerHarness) -> None:
    await broker.create_topic("followed", leader=1, replicas=(1, 0), leader_epoch=2)
    log = broker.broker.replicas.replicas[TopicPartition("followed", 0)].log
    assert log.leader_epochs.entries == ()


async def test_a_failed_log_fails_its_partition_only_and_is_created_later(
    broker: BrokerHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepare = log_creation.prepare
    broken = {"flaky-2"}

    def failing(data_dir: Path, new: NewLog) -> StagedLog:
        if new.dir_name in broken:
            raise OSError(28, "No space left on device")
        return prepare(data_dir, new)

    monkeypatch.setattr(log_creation, "prepare", failing)
    await broker.create_topic("flaky", partitions=4)
    hosted = broker.broker.replicas.replicas
    assert set(hosted) == {TopicPartition("flaky", p) for p in (0, 1, 3)}
    assert not (broker.broker.logs.data_dir / "flaky-2").exists()
    with pytest.raises(NotLeaderOrFollowerError, match="not ready"):
        broker.broker.replicas.leader(TopicPartition("flaky", 2))
    broken.clear()
    manager = broker.broker.replicas
    host, created = manager._host, asyncio.Event()

    def watched(desired: DesiredReplica) -> None:
        host(desired)
        if desired.tp == TopicPartition("flaky", 2):
            created.set()

    monkeypatch.setattr(manager, "_host", watched)
    # The next metadata change, whatever it is, creates it (the reconcile loop, not a full pass).
    other = TopicRecord(
        name="other", topic_id="x", partitions=1, replication_factor=1, created_at_ms=0
    )
    await broker.store.put(broker.keyspace.topic("other"), other.encode())
    await asyncio.wait_for(created.wait(), 5)
    assert TopicPartition("flaky", 2) in hosted
    replica, _ = broker.broker.replicas.leader(TopicPartition("flaky", 2))
    assert replica.log.log_end_offset == 0


async def _move_leaderships_here(broker: BrokerHarness, topic: str, partitions: int) -> None:
    """Broker 1 is gone: every leadership of ``topic`` moves here at once (one metadata pass)."""
    for p in range(partitions):
        state = PartitionState(
            topic=topic, partition=p, leader=0, leader_epoch=1, replicas=(1, 0), isr=(0,)
        )
        revision = await broker.store.put(broker.keyspace.partition(topic, p), state.encode())
    await broker.sync(revision)


async def test_a_failover_writes_the_new_leader_epochs_off_the_loop_before_serving(
    broker: BrokerHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    await broker.create_topic("moved", partitions=40, leader=1, replicas=(1, 0))
    loop_thread = threading.current_thread()
    written_on: list[threading.Thread] = []
    write = checkpoint.write_atomically

    def recorded(path: Path | str, data: bytes) -> None:
        if Path(path).name == LEADER_EPOCH_CHECKPOINT_FILE_NAME:
            written_on.append(threading.current_thread())
        write(path, data)

    monkeypatch.setattr(checkpoint, "write_atomically", recorded)
    await _move_leaderships_here(broker, "moved", 40)
    assert len(written_on) == 40  # each new leader's epoch, written once ...
    assert loop_thread not in written_on  # ... on the I/O threads, not the event loop
    for p in range(40):
        replica, _ = broker.broker.replicas.leader(TopicPartition("moved", p))
        on_disk = LeaderEpochCache(replica.log.leader_epochs.path)
        assert on_disk.entries == (EpochEntry(1, 0),)  # durable before it serves
        assert not replica.log.leader_epochs.unpersisted
    batch = bytes(encode_batch([RecordInput(value=b"v")]))
    assert (await broker.client.produce_one("moved", 3, batch)).base_offset == 0


async def test_a_failed_epoch_write_keeps_its_partition_from_leading_until_written(
    broker: BrokerHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    await broker.create_topic("stuck", partitions=3, leader=1, replicas=(1, 0))
    write = checkpoint.write_atomically
    broken = {"stuck-1"}

    def failing(path: Path | str, data: bytes) -> None:
        if (
            Path(path).parent.name in broken
            and Path(path).name == LEADER_EPOCH_CHECKPOINT_FILE_NAME
        ):
            raise OSError(5, "Input/output error")
        write(path, data)

    monkeypatch.setattr(checkpoint, "write_atomically", failing)
    await _move_leaderships_here(broker, "stuck", 3)
    manager = broker.broker.replicas
    for p in (0, 2):
        manager.leader(TopicPartition("stuck", p))
    with pytest.raises(NotLeaderOrFollowerError, match="not ready"):
        manager.leader_partition(TopicPartition("stuck", 1))
    log = broker.broker.logs.get(TopicPartition("stuck", 1)).log
    assert LeaderEpochCache(log.leader_epochs.path).entries == ()
    broken.clear()
    host, led = manager._host, asyncio.Event()

    def watched(desired: DesiredReplica) -> bool:
        stamped = host(desired)
        if desired.tp == TopicPartition("stuck", 1):
            led.set()
        return stamped

    monkeypatch.setattr(manager, "_host", watched)
    # The next metadata change, whatever it is, writes it again and the partition leads.
    other = TopicRecord(
        name="other", topic_id="x", partitions=1, replication_factor=1, created_at_ms=0
    )
    await broker.store.put(broker.keyspace.topic("other"), other.encode())
    await asyncio.wait_for(led.wait(), 5)
    manager.leader_partition(TopicPartition("stuck", 1))
    assert LeaderEpochCache(log.leader_epochs.path).entries == (EpochEntry(1, 0),)
