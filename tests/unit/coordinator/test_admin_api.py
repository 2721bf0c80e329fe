"""The admin API in-process: an app on a MemoryMetadataStore, driven by the typed AdminClient."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from yak.clients.admin import AdminClient
from yak.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import NO_LEADER, BrokerRegistration, TopicRecord
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

    async def add_broker(self, broker_id: int) -> None:
        value = BrokerRegistration(
            broker_id=broker_id, host="127.0.0.1", port=9500 + broker_id, started_at_ms=1
        )
        await self.store.put(KS.broker(broker_id), value.encode())

    async def topic_keys(self) -> list[bytes]:
        result = await self.store.range_prefix(KS.root)
        return [kv.key for kv in result.kvs if b"/controller" not in kv.key]


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
