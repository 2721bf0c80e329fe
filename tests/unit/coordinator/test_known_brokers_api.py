"""Known brokers through the admin API, in process on the in-memory store: a broker that left
is listed down with when it was last seen, and ``DELETE /brokers/{id}`` forgets it — refused
while it runs or holds replicas."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from yak.api.admin import BrokerInfo, BrokerStatus
from yak.clients.admin import AdminClient
from yak.errors import (
    BrokerHasReplicasError,
    BrokerIdNotRegisteredError,
    BrokerStillRegisteredError,
)
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerRegistration
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
    http: httpx.AsyncClient
    leases: dict[int, int]

    async def register(self, broker_id: int) -> None:
        value = BrokerRegistration(
            broker_id=broker_id,
            host="127.0.0.1",
            port=9500 + broker_id,
            started_at_ms=1_000 + broker_id,
            incarnation=f"i{broker_id}",
        )
        lease = self.leases[broker_id] = await self.store.grant_lease(60)
        await self.store.put(KS.broker(broker_id), value.encode(), lease=lease)

    async def leave(self, broker_id: int) -> None:
        await self.store.revoke_lease(self.leases.pop(broker_id))

    async def wait_for(self, predicate: Callable[[ClusterSnapshot], bool]) -> ClusterSnapshot:
        coordinator: Coordinator = self.app.state.coordinator
        snapshot: ClusterSnapshot = await coordinator.cache.wait_for(predicate, 5)
        return snapshot

    async def brokers(self) -> dict[int, BrokerInfo]:
        return {b.broker_id: b for b in (await self.admin.cluster()).brokers}


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    store = MemoryMetadataStore()
    settings = CoordinatorSettings(
        cluster_id="unit", node_id="c0", admin_wait_s=5.0, auto_leader_rebalance=False
    )
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
                c = Cluster(app, store, admin, http, {})
                for broker_id in (1, 2):
                    await c.register(broker_id)
                await c.wait_for(lambda s: len(s.broker_records) == 2)
                yield c
    finally:
        await store.aclose()


async def test_a_broker_that_left_is_listed_down_with_its_last_seen_time(cluster: Cluster) -> None:
    listed = await cluster.brokers()
    assert {b: (i.status, i.first_registered_ms) for b, i in listed.items()} == {
        1: (BrokerStatus.UP, 1_001),
        2: (BrokerStatus.UP, 1_002),
    }
    before_leaving = listed[2].last_seen_ms
    assert before_leaving is not None  # "now", for a registered broker
    await cluster.leave(2)
    await cluster.wait_for(lambda s: not s.broker_records[2].registered)
    down = (await cluster.brokers())[2]
    assert (down.status, down.host, down.port, down.started_at_ms) == (
        BrokerStatus.DOWN,
        "127.0.0.1",
        9502,
        1_002,
    )
    assert down.last_seen_ms is not None
    assert down.last_seen_ms >= before_leaving
    # The answer does not age: a down broker's last-seen time is the record's.
    await asyncio.sleep(0.01)
    assert (await cluster.brokers())[2].last_seen_ms == down.last_seen_ms
    # Back: up again, first registered kept.
    await cluster.register(2)
    await cluster.wait_for(lambda s: s.broker_records[2].registered)
    again = (await cluster.brokers())[2]
    assert (again.status, again.first_registered_ms) == (BrokerStatus.UP, 1_002)


async def test_forget_is_refused_while_registered_or_a_replica_and_404_when_unknown(
    cluster: Cluster,
) -> None:
    await cluster.admin.create_topic("t", partitions=1, replication_factor=2)
    with pytest.raises(BrokerStillRegisteredError):
        await cluster.admin.forget_broker(2)
    answer = await cluster.http.delete("/admin/v1/brokers/2")
    assert (answer.status_code, answer.json()["code"]) == (409, "BROKER_STILL_REGISTERED")

    await cluster.leave(2)
    await cluster.wait_for(lambda s: 2 not in s.brokers)
    answer = await cluster.http.delete("/admin/v1/brokers/2")
    assert (answer.status_code, answer.json()["code"]) == (409, "BROKER_HAS_REPLICAS")
    assert "t-0" in answer.json()["message"]
    with pytest.raises(BrokerHasReplicasError):
        await cluster.admin.forget_broker(2)

    answer = await cluster.http.delete("/admin/v1/brokers/7")
    assert (answer.status_code, answer.json()["code"]) == (404, "BROKER_ID_NOT_REGISTERED")
    with pytest.raises(BrokerIdNotRegisteredError):
        await cluster.admin.forget_broker(7)
    answer = await cluster.http.delete("/admin/v1/brokers/-1")
    assert answer.status_code == 400


async def test_a_broker_gone_for_good_is_forgotten_with_its_decommission_mark(
    cluster: Cluster,
) -> None:
    await cluster.admin.decommission_broker(2)
    await cluster.leave(2)
    await cluster.wait_for(lambda s: not s.broker_records[2].registered)
    forgotten = await cluster.admin.forget_broker(2)
    assert forgotten.broker_id == 2
    assert forgotten.last_seen_ms is not None
    assert list(await cluster.brokers()) == [1]
    assert await cluster.store.get(KS.broker_record(2)) is None
    assert await cluster.store.get(KS.decommission(2)) is None
    assert (await cluster.admin.decommissions()).brokers == []
    # Nothing brings it back (the controller's sightings of it are dropped with the record)...
    await asyncio.sleep(0.05)
    assert await cluster.store.get(KS.broker_record(2)) is None
    # ...but registering again does.
    await cluster.register(2)
    await cluster.wait_for(lambda s: 2 in s.broker_records)
    assert (await cluster.brokers())[2].status is BrokerStatus.UP
