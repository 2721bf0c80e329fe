"""Preferred leader election and broker decommission through the admin API, in process on
the in-memory store, driven by the typed AdminClient (auto leader rebalance off)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from yak.clients.admin import AdminClient
from yak.errors import (
    BrokerNotAvailableError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerRegistration, PartitionState
from yak.metadata.snapshot import ClusterSnapshot
from yak_coordinator.app import create_app
from yak_coordinator.service import Coordinator
from yak_coordinator.settings import CoordinatorSettings

KS = Keyspace("unit")


@dataclass
class Cluster:
    app: FastAPI
    store: MemoryMetadataStore
    admin: AdminClient

    async def add_broker(self, broker_id: int) -> None:
        value = BrokerRegistration(
            broker_id=broker_id, host="127.0.0.1", port=9500 + broker_id, started_at_ms=1
        )
        await self.store.put(KS.broker(broker_id), value.encode())

    async def state(self, topic: str, partition: int) -> PartitionState:
        kv = await self.store.get(KS.partition(topic, partition))
        assert kv is not None
        return PartitionState.decode(kv.value)

    async def put_state(self, state: PartitionState) -> None:
        """Write a partition state as a leader's AlterPartition would."""
        bumped = state.model_copy(update={"partition_epoch": state.partition_epoch + 1})
        await self.store.put(KS.partition(state.topic, state.partition), bumped.encode())

    async def wait_for(self, predicate: Callable[[ClusterSnapshot], bool]) -> ClusterSnapshot:
        cache = self.app.state.coordinator.cache
        snapshot: ClusterSnapshot = await cache.wait_for(predicate, 5)
        return snapshot


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    store = MemoryMetadataStore()
    settings = CoordinatorSettings(
        cluster_id="unit", node_id="c0", admin_wait_s=5.0, auto_leader_rebalance=False
    )
    app = create_app(settings, store=store)
    coordinator: Coordinator = app.state.coordinator
    try:
        async with app.router.lifespan_context(app):
            await asyncio.wait_for(coordinator.wait_controller(), 5)
            async with AdminClient("http://test", transport=httpx.ASGITransport(app=app)) as admin:
                c = Cluster(app, store, admin)
                for broker_id in (1, 2, 3):
                    await c.add_broker(broker_id)
                await coordinator.cache.wait_for(lambda s: len(s.brokers) == 3, 5)
                yield c
    finally:
        await store.aclose()


async def test_elect_leaders_moves_leadership_back_to_the_preferred_replica(
    cluster: Cluster,
) -> None:
    created = await cluster.admin.create_topic("el", partitions=2, replication_factor=2)
    p0 = created.partitions[0]
    other = p0.replicas[1]
    # Leadership moved away (as after a failover) and nothing moves it back by itself.
    await cluster.put_state(
        (await cluster.state("el", 0)).model_copy(
            update={"leader": other, "leader_epoch": p0.leader_epoch + 1}
        )
    )
    await cluster.wait_for(lambda s: s.partitions[("el", 0)].leader == other)

    asked = [("el", 0), ("el", 1), ("nope", 0), ("el", 9), ("../x", 0)]
    result = await cluster.admin.elect_leaders(asked)
    outcome = {(r.topic, r.partition): (r.leader, r.error) for r in result.results}
    assert outcome == {
        ("el", 0): (p0.replicas[0], None),
        ("el", 1): (created.partitions[1].leader, "ELECTION_NOT_NEEDED"),
        ("nope", 0): (-1, "UNKNOWN_TOPIC_OR_PARTITION"),
        ("el", 9): (-1, "UNKNOWN_TOPIC_OR_PARTITION"),
        ("../x", 0): (-1, "UNKNOWN_TOPIC_OR_PARTITION"),  # never becomes a key
    }
    state = await cluster.state("el", 0)
    assert (state.leader, state.leader_epoch) == (p0.replicas[0], p0.leader_epoch + 2)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=cluster.app), base_url="http://test"
    ) as http:
        metrics = (await http.get("/metrics")).text
    assert 'yak_coordinator_leader_elections_total{kind="preferred"} 1.0' in metrics
    # Every partition when none is named; nothing left to do.
    again = await cluster.admin.elect_leaders()
    assert {r.error for r in again.results} == {"ELECTION_NOT_NEEDED"}


async def test_elect_leaders_reports_an_unavailable_preferred_replica(cluster: Cluster) -> None:
    created = await cluster.admin.create_topic("ua", partitions=1, replication_factor=2)
    p0 = created.partitions[0]
    preferred, other = p0.replicas
    await cluster.put_state(
        (await cluster.state("ua", 0)).model_copy(
            update={"leader": other, "isr": (other,), "leader_epoch": 1}
        )
    )
    await cluster.wait_for(lambda s: s.partitions[("ua", 0)].leader == other)
    (result,) = (await cluster.admin.elect_leaders([("ua", 0)])).results
    assert (result.leader, result.error) == (other, "PREFERRED_LEADER_NOT_AVAILABLE")
    assert preferred not in (await cluster.state("ua", 0)).isr


async def test_decommission_drains_a_broker_and_recommission_stops(cluster: Cluster) -> None:
    await cluster.admin.create_topic("dc", partitions=3, replication_factor=2)
    on_2 = [p for p in range(3) if 2 in (await cluster.state("dc", p)).replicas]
    assert on_2
    status = await cluster.admin.decommission_broker(2)
    assert (status.decommissioning, status.alive, status.done) == (True, True, False)
    assert (await cluster.admin.cluster()).brokers[1].decommissioning
    # Reassignments start; nothing may be placed on broker 2 meanwhile.
    with pytest.raises(InvalidReplicaAssignmentError, match="decommissioned"):
        await cluster.admin.reassign_partition("dc", on_2[0], [2, 1])

    def moving(snapshot: ClusterSnapshot) -> bool:
        states = [snapshot.partitions[("dc", p)] for p in on_2]
        return all(2 in s.removing_replicas and s.leader != 2 for s in states)

    await cluster.wait_for(moving)
    for p in on_2:  # the new replicas catch up
        state = await cluster.state("dc", p)
        await cluster.put_state(
            state.model_copy(update={"isr": (*state.isr, *state.adding_replicas)})
        )

    def drained(snapshot: ClusterSnapshot) -> bool:
        return all(2 not in s.replicas for s in snapshot.partitions_of("dc"))

    snapshot = await cluster.wait_for(drained)
    assert all(len(s.replicas) == 2 == len(s.isr) for s in snapshot.partitions_of("dc"))
    (listed,) = (await cluster.admin.decommissions()).brokers
    assert (listed.broker_id, listed.done, listed.replicas, listed.leaders) == (2, True, 0, 0)
    assert (await cluster.admin.partitions()).partitions == []  # nothing under-replicated

    again = await cluster.admin.decommission_broker(2)  # idempotent
    assert again.requested_at_ms == status.requested_at_ms
    back = await cluster.admin.recommission_broker(2)
    assert not back.decommissioning
    assert (await cluster.admin.decommissions()).brokers == []
    moved = await cluster.admin.reassign_partition("dc", on_2[0], [2, 1])
    assert 2 in moved.adding_replicas


async def test_decommission_refusals(cluster: Cluster) -> None:
    with pytest.raises(BrokerNotAvailableError):
        await cluster.admin.decommission_broker(9)
    await cluster.admin.create_topic("rf3", partitions=1, replication_factor=3)
    with pytest.raises(InvalidReplicationFactorError, match="only 2 other brokers"):
        await cluster.admin.decommission_broker(1)
    assert (await cluster.admin.decommissions()).brokers == []


async def test_concurrent_decommissions_cannot_leave_too_few_brokers(cluster: Cluster) -> None:
    await cluster.admin.create_topic("two", partitions=3, replication_factor=2)
    results = await asyncio.gather(
        cluster.admin.decommission_broker(1),
        cluster.admin.decommission_broker(2),
        return_exceptions=True,
    )
    refused = [r for r in results if isinstance(r, InvalidReplicationFactorError)]
    assert len(refused) == 1, results
    assert len((await cluster.admin.decommissions()).brokers) == 1


def test_operations_settings_from_the_environment() -> None:
    settings = CoordinatorSettings.from_env(
        {"YAK_AUTO_LEADER_REBALANCE": "false", "YAK_DECOMMISSION_MAX_MOVES": "3"}
    )
    assert (settings.auto_leader_rebalance, settings.decommission_max_moves) == (False, 3)
    assert CoordinatorSettings.from_env({}).auto_leader_rebalance
    with pytest.raises(ValueError, match="YAK_AUTO_LEADER_REBALANCE"):
        CoordinatorSettings.from_env({"YAK_AUTO_LEADER_REBALANCE": "maybe"})
