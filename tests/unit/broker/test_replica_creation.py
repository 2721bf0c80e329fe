"""The replica manager creates new replicas' logs in bulk (issue 19): each folder with its topic
id and, where this broker leads, its leader epoch; a log that fails to be created fails its
partition alone, which is created at the next metadata change."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from tests.unit.broker.broker_harness import BrokerHarness
from yak.errors import NotLeaderOrFollowerError
from yak.metadata.models import PartitionState, TopicRecord
from yak.record import RecordInput, encode_batch
from yak_broker.replication.partition_metadata import read_topic_id
from yak_broker.replication.replica_plan import DesiredReplica
from yak_broker.storage import log_creation
from yak_broker.storage.leader_epoch_cache import EpochEntry, LeaderEpochCache
from yak_broker.storage.log_creation import NewLog, StagedLog
from yak_broker.storage.log_manager import TopicPartition


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


async def test_a_failover_yields_the_loop_between_leader_epoch_stamps(
    broker: BrokerHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    await broker.create_topic("moved", partitions=40, leader=1, replicas=(1, 0))
    ticks = 0

    async def probe() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    stamps_at: list[int] = []
    flush = LeaderEpochCache._flush

    def recorded(cache: LeaderEpochCache) -> None:
        stamps_at.append(ticks)
        flush(cache)

    monkeypatch.setattr(LeaderEpochCache, "_flush", recorded)
    probing = asyncio.create_task(probe())
    try:
        # Broker 1 is gone: every leadership moves here at once (one metadata pass).
        for p in range(40):
            state = PartitionState(
                topic="moved", partition=p, leader=0, leader_epoch=1, replicas=(1, 0), isr=(0,)
            )
            revision = await broker.store.put(broker.keyspace.partition("moved", p), state.encode())
        await broker.sync(revision)
    finally:
        probing.cancel()
    assert len(stamps_at) == 40  # each new leader stamps its epoch (two fsyncs) ...
    assert all(a < b for a, b in itertools.pairwise(stamps_at))  # ... with the loop free between
