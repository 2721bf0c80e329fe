"""The admin API in-process: an app on a MemoryMetadataStore, driven by the typed AdminClient."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from yak.clients.admin import AdminClient
from yak.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import NO_LEADER, BrokerRegistration, PartitionState, TopicRecord
from yak.metadata.snapshot import ClusterSnapshot
from yak_coordinator.app import create_app
from yak_coordinator.service import Coordinator
from yak_coordinator.settings import CoordinatorSettings

KS = Keyspace("unit")


@dataclass
class Harness:
    app: FastAPI
    store: MemoryMetadataStore
    admin: AdminClient
    http: httpx.AsyncClient

    async def add_broker(self, broker_id: int, *, shutting_down: bool = False) -> None:
        value = BrokerRegistration(
            broker_id=broker_id,
            host="127.0.0.1",
            port=9500 + broker_id,
            started_at_ms=1,
            shutting_down=shutting_down,
        )
        await self.store.put(KS.broker(broker_id), value.encode())

    async def partition_state(self, topic: str, partition: int) -> PartitionState:
        kv = await self.store.get(KS.partition(topic, partition))
        assert kv is not None
        return PartitionState.decode(kv.value)

    async def set_isr(self, topic: str, partition: int, isr: tuple[int, ...]) -> None:
        """Change the ISR as the partition's leader would (AlterPartition)."""
        state = await self.partition_state(topic, partition)
        changed = state.model_copy(
            update={"isr": isr, "partition_epoch": state.partition_epoch + 1}
        )
        await self.store.put(KS.partition(topic, partition), changed.encode())

    async def wait_for(self, predicate: Callable[[ClusterSnapshot], bool]) -> ClusterSnapshot:
        cache = self.app.state.coordinator.cache
        await cache.wait_for(predicate, 5)
        snapshot: ClusterSnapshot = cache.snapshot
        return snapshot

    async def topic_keys(self) -> list[bytes]:
        """Every key but the controller's and the broker records (the controller's own)."""
        result = await self.store.range_prefix(KS.root)
        records = KS.broker_records_prefix.encode()
        return [
            kv.key
            for kv in result.kvs
            if b"/controller" not in kv.key and not kv.key.startswith(records)
        ]


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    store = MemoryMetadataStore()
    settings = CoordinatorSettings(cluster_id="unit", node_id="c0", admin_wait_s=5.0)
    app = create_app(settings, store=store)
    coordinator: Coordinator = app.state.coordinator
    transport = httpx.ASGITransport(app=app)
    try:
        async with app.router.lifespan_context(app):
            await asyncio.wait_for(coordinator.wait_controller(), 5)
            async with (
                AdminClient("http://test", transport=transport) as admin,
                httpx.AsyncClient(transport=transport, base_url="http://test") as http,
            ):
                h = Harness(app, store, admin, http)
                for broker_id in (1, 2, 3):
                    await h.add_broker(broker_id)
                await coordinator.cache.wait_for(lambda s: len(s.brokers) == 3, 5)
                yield h
    finally:
        await store.aclose()


async def test_create_describe_list_delete(harness: Harness) -> None:
    created = await harness.admin.create_topic(
        "orders", partitions=3, replication_factor=2, configs={"retention.ms": " 1000 "}
    )
    assert created.partition_count == 3
    assert created.configs == {"retention.ms": "1000"}
    assert [p.partition for p in created.partitions] == [0, 1, 2]
    for p in created.partitions:
        assert len(p.replicas) == 2
        assert p.leader == p.replicas[0]
        assert p.isr == p.replicas

    described = await harness.admin.describe_topic("orders")
    assert described == created
    listed = await harness.admin.list_topics()
    assert [(t.name, t.partitions, t.replication_factor) for t in listed.topics] == [
        ("orders", 3, 2)
    ]
    cluster = await harness.admin.cluster()
    assert cluster.controller is not None
    assert cluster.controller.coordinator_id == "c0"
    assert cluster.controller.epoch > 0
    assert (cluster.topic_count, cluster.partition_count) == (1, 3)
    assert [b.broker_id for b in cluster.brokers] == [1, 2, 3]

    deleted = await harness.admin.delete_topic("orders")
    assert deleted.deleted
    assert await harness.topic_keys() == [KS.broker(b).encode() for b in (1, 2, 3)]
    with pytest.raises(UnknownTopicOrPartitionError):
        await harness.admin.describe_topic("orders")


async def test_default_replication_factor_is_one(harness: Harness) -> None:
    created = await harness.admin.create_topic("events")
    assert (created.partition_count, created.replication_factor) == (1, 1)


@pytest.mark.parametrize(
    ("kwargs", "error", "code"),
    [
        ({"name": "bad name!"}, InvalidTopicError, "INVALID_TOPIC_EXCEPTION"),
        ({"name": "t", "partitions": 0}, InvalidPartitionsError, "INVALID_PARTITIONS"),
        ({"name": "t", "partitions": 10_001}, InvalidPartitionsError, "INVALID_PARTITIONS"),
        ({"name": "t", "replication_factor": 4}, InvalidReplicationFactorError, None),
        ({"name": "t", "replication_factor": 0}, InvalidReplicationFactorError, None),
        ({"name": "t", "configs": {"no.such": "1"}}, InvalidConfigError, "INVALID_CONFIG"),
        ({"name": "t", "configs": {"retention.ms": "-2"}}, InvalidConfigError, None),
        ({"name": "t", "configs": {"min.insync.replicas": "2"}}, InvalidConfigError, None),
    ],
)
async def test_invalid_create_is_refused_and_writes_nothing(
    harness: Harness, kwargs: dict[str, object], error: type[Exception], code: str | None
) -> None:
    response = await harness.http.post("/admin/v1/topics", json=kwargs)
    assert response.status_code == 400
    if code is not None:
        assert response.json()["code"] == code
    with pytest.raises(error):
        await harness.admin.create_topic(**kwargs)  # type: ignore[arg-type]
    assert len(await harness.topic_keys()) == 3  # only the brokers


async def test_malformed_body_is_invalid_request(harness: Harness) -> None:
    response = await harness.http.post("/admin/v1/topics", json={"partitions": "many"})
    assert response.status_code == 400
    assert response.json()["code"] == InvalidRequestError.code


async def test_create_existing_topic_conflicts(harness: Harness) -> None:
    await harness.admin.create_topic("dup")
    with pytest.raises(TopicAlreadyExistsError):
        await harness.admin.create_topic("dup", partitions=5)
    response = await harness.http.post("/admin/v1/topics", json={"name": "dup"})
    assert (response.status_code, response.json()["code"]) == (409, "TOPIC_ALREADY_EXISTS")


async def test_concurrent_creates_have_one_winner(harness: Harness) -> None:
    results = await asyncio.gather(
        *(harness.admin.create_topic("race", partitions=i) for i in range(1, 6)),
        return_exceptions=True,
    )
    assert sum(not isinstance(r, Exception) for r in results) == 1
    assert all(isinstance(r, TopicAlreadyExistsError) for r in results if isinstance(r, Exception))


async def test_alter_configs_sets_and_deletes(harness: Harness) -> None:
    await harness.admin.create_topic("cfg", replication_factor=2, configs={"retention.ms": "5"})
    altered = await harness.admin.alter_topic_configs(
        "cfg",
        set_configs={"cleanup.policy": "delete,compact", "min.insync.replicas": "2"},
        delete_configs=["retention.ms"],
    )
    assert altered.configs == {"cleanup.policy": "compact,delete", "min.insync.replicas": "2"}
    with pytest.raises(InvalidConfigError):
        await harness.admin.alter_topic_configs("cfg", set_configs={"min.insync.replicas": "3"})
    with pytest.raises(InvalidConfigError):
        await harness.admin.alter_topic_configs("cfg", delete_configs=["no.such.config"])
    with pytest.raises(UnknownTopicOrPartitionError):
        await harness.admin.alter_topic_configs("missing", set_configs={"retention.ms": "1"})


async def test_partitions_only_grow(harness: Harness) -> None:
    await harness.admin.create_topic("grow", partitions=2, replication_factor=3)
    grown = await harness.admin.create_partitions("grow", 5)
    assert grown.partition_count == 5
    assert [p.partition for p in grown.partitions] == [0, 1, 2, 3, 4]
    for count in (5, 3):
        with pytest.raises(InvalidPartitionsError):
            await harness.admin.create_partitions("grow", count)


async def test_broker_death_moves_leadership(harness: Harness) -> None:
    created = await harness.admin.create_topic("ha", partitions=3, replication_factor=2)
    victim = created.partitions[0].leader
    await harness.store.delete(KS.broker(victim))
    cache = harness.app.state.coordinator.cache

    def moved(snapshot: object) -> bool:
        states = cache.snapshot.partitions_of("ha")
        return all(s.leader != victim and victim not in s.isr for s in states)

    await cache.wait_for(moved, 5)
    after = await harness.admin.describe_topic("ha")
    first = after.partitions[0]
    assert first.leader not in (victim, NO_LEADER)
    assert first.leader_epoch == 1


async def test_topic_record_written_without_partitions_is_completed(harness: Harness) -> None:
    """A record written by a controller that died before creating partitions."""
    record = TopicRecord(
        name="half", topic_id="x", partitions=2, replication_factor=1, created_at_ms=1
    )
    await harness.store.put(KS.topic("half"), record.encode())
    cache = harness.app.state.coordinator.cache
    await cache.wait_for(lambda s: len(s.partitions_of("half")) == 2, 5)


async def test_partition_health_lists_under_replicated_under_min_isr_and_offline(
    harness: Harness,
) -> None:
    coordinator: Coordinator = harness.app.state.coordinator
    await harness.admin.create_topic(
        "health", partitions=2, replication_factor=3, configs={"min.insync.replicas": "3"}
    )
    assert (await harness.admin.partitions()).partitions == []
    assert len((await harness.admin.partitions("all")).partitions) == 2

    await harness.store.delete(KS.broker(3))  # broker 3 dies: it leaves every ISR
    await coordinator.cache.wait_for(
        lambda s: all(3 not in p.isr for p in s.partitions.values()), 5
    )
    unhealthy = (await harness.admin.partitions()).partitions
    assert [(p.partition, p.under_replicated, p.under_min_isr, p.offline) for p in unhealthy] == [
        (0, True, True, False),
        (1, True, True, False),
    ]
    cluster = await harness.admin.cluster()
    assert (cluster.under_replicated_partition_count, cluster.under_min_isr_partition_count) == (
        2,
        2,
    )
    assert cluster.offline_partition_count == 0
    bad = await harness.http.get("/admin/v1/partitions", params={"state": "sideways"})
    assert bad.status_code == 400
    assert "sideways" in bad.text or bad.json()["code"] == "INVALID_REQUEST"


# -- controlled shutdown and reassignment -----------------------------------------------------


async def test_a_shutting_down_broker_hands_its_leaderships_over(harness: Harness) -> None:
    created = await harness.admin.create_topic("cs", partitions=3, replication_factor=3)
    victim = created.partitions[0].leader
    led = {p.partition: p for p in created.partitions if p.leader == victim}
    await harness.add_broker(victim, shutting_down=True)

    def moved(snapshot: ClusterSnapshot) -> bool:
        return all(s.leader != victim for s in snapshot.partitions_of("cs"))

    await harness.wait_for(moved)
    after = await harness.admin.describe_topic("cs")
    for partition, before in led.items():
        state = after.partitions[partition]
        assert state.leader not in (victim, NO_LEADER)
        assert victim in state.isr  # still in sync: only leadership moves
        assert state.leader_epoch == before.leader_epoch + 1
        assert state.partition_epoch == before.partition_epoch + 1
    await harness.add_broker(victim)  # back without the flag: preferred leadership returns
    await harness.wait_for(lambda s: any(p.leader == victim for p in s.partitions_of("cs")))


async def test_reassignment_moves_a_partition_once_the_new_replicas_are_in_sync(
    harness: Harness,
) -> None:
    created = await harness.admin.create_topic("mv", partitions=1, replication_factor=2)
    before = created.partitions[0]
    newcomer = next(b for b in (1, 2, 3) if b not in before.replicas)
    kept = before.replicas[1]
    target = [newcomer, kept]

    started = await harness.admin.reassign_partition("mv", 0, target)
    assert started.replicas == [newcomer, kept, before.leader]
    assert (started.adding_replicas, started.removing_replicas) == ([newcomer], [before.leader])
    assert started.isr == before.isr  # the new replica starts outside the ISR
    listed = (await harness.admin.reassignments()).reassignments
    assert [(r.topic, r.partition) for r in listed] == [("mv", 0)]
    described = (await harness.admin.describe_topic("mv")).partitions[0]
    assert described.adding_replicas == [newcomer]
    assert (await harness.admin.partitions()).partitions == []  # a move is not under-replicated

    await harness.set_isr("mv", 0, (*before.isr, newcomer))  # the newcomer caught up

    def done(snapshot: ClusterSnapshot) -> bool:
        return not snapshot.partitions[("mv", 0)].reassigning

    snapshot = await harness.wait_for(done)
    state = snapshot.partitions[("mv", 0)]
    assert (state.replicas, sorted(state.isr)) == (tuple(target), sorted(target))
    assert state.leader == newcomer  # the old leader was removed: the first in-sync target leads
    assert state.leader_epoch == before.leader_epoch + 1
    assert (await harness.admin.reassignments()).reassignments == []


async def test_cancelling_a_reassignment_restores_the_original_replicas(harness: Harness) -> None:
    created = await harness.admin.create_topic("cx", partitions=1, replication_factor=1)
    before = created.partitions[0]
    other = next(b for b in (1, 2, 3) if b != before.leader)
    await harness.admin.reassign_partition("cx", 0, [other])
    cancelled = await harness.admin.cancel_reassignment("cx", 0)
    assert (cancelled.replicas, cancelled.isr, cancelled.leader) == (
        before.replicas,
        before.isr,
        before.leader,
    )
    assert (cancelled.adding_replicas, cancelled.removing_replicas) == ([], [])
    assert (await harness.admin.reassignments()).reassignments == []
    # Cancelling again: nothing is running, nothing is written.
    stored = await harness.partition_state("cx", 0)
    again = await harness.admin.cancel_reassignment("cx", 0)
    assert again.partition_epoch == stored.partition_epoch
    assert (await harness.partition_state("cx", 0)) == stored


async def test_invalid_reassignments_are_refused_and_write_nothing(harness: Harness) -> None:
    await harness.admin.create_topic(
        "iv", partitions=1, replication_factor=2, configs={"min.insync.replicas": "2"}
    )
    before = await harness.topic_keys()
    stored = await harness.partition_state("iv", 0)
    for replicas in ([1, 1], [1, 9], [2]):
        with pytest.raises(InvalidReplicaAssignmentError):
            await harness.admin.reassign_partition("iv", 0, replicas)
    path = "/admin/v1/topics/iv/partitions/0/reassignment"
    empty = await harness.http.put(path, json={"replicas": []})
    assert (empty.status_code, empty.json()["code"]) == (400, "INVALID_REQUEST")
    dup = await harness.http.put(path, json={"replicas": [3, 3]})
    assert (dup.status_code, dup.json()["code"]) == (400, "INVALID_REPLICA_ASSIGNMENT")
    for bad in (
        "/admin/v1/topics/iv/partitions/5/reassignment",
        "/admin/v1/topics/iv/partitions/-1/reassignment",
        "/admin/v1/topics/nope/partitions/0/reassignment",
    ):
        missing = await harness.http.put(bad, json={"replicas": [1, 2]})
        assert (missing.status_code, missing.json()["code"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION")
    with pytest.raises(UnknownTopicOrPartitionError):
        await harness.admin.cancel_reassignment("iv", 3)
    assert await harness.topic_keys() == before
    assert await harness.partition_state("iv", 0) == stored


async def test_internal_topics_cannot_be_deleted_altered_or_grown(harness: Harness) -> None:
    coordinator: Coordinator = harness.app.state.coordinator
    await coordinator.admin.create_topic("__yak_share_state", 2, 1, {}, internal=True)
    before = await harness.topic_keys()
    for response in (
        await harness.http.delete("/admin/v1/topics/__yak_share_state"),
        await harness.http.patch(
            "/admin/v1/topics/__yak_share_state/configs", json={"set": {"retention.ms": "1"}}
        ),
        await harness.http.post("/admin/v1/topics/__yak_share_state/partitions", json={"count": 3}),
    ):
        assert response.status_code == 400, response.text
        assert response.json()["code"] == "POLICY_VIOLATION"
        assert "internal" in response.json()["message"]
    assert await harness.topic_keys() == before  # nothing written
