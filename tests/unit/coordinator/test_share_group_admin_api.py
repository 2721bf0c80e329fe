"""The share-group admin API in-process: an app on a MemoryMetadataStore, driven by the typed
AdminClient (create, list, describe, alter, delete; the state topic; refusals write nothing)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from yak.api.share_groups import AlterShareGroupRequest, CreateShareGroupRequest
from yak.clients.admin import AdminClient
from yak.errors import (
    DuplicateResourceError,
    GroupIdNotFoundError,
    InvalidConfigError,
    InvalidGroupIdError,
    InvalidRequestError,
    InvalidTopicError,
    UnknownTopicOrPartitionError,
)
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerRegistration, ShareGroupRecord
from yak_coordinator.app import create_app
from yak_coordinator.decisions.share_group_rules import SHARE_STATE_TOPIC
from yak_coordinator.service import Coordinator
from yak_coordinator.settings import CoordinatorSettings

KS = Keyspace("unit")


@dataclass
class Harness:
    app: FastAPI
    store: MemoryMetadataStore
    admin: AdminClient
    http: httpx.AsyncClient

    async def add_brokers(self, *broker_ids: int) -> None:
        for broker_id in broker_ids:
            value = BrokerRegistration(
                broker_id=broker_id, host="127.0.0.1", port=9500 + broker_id, started_at_ms=1
            )
            await self.store.put(KS.broker(broker_id), value.encode())
        coordinator: Coordinator = self.app.state.coordinator
        await coordinator.cache.wait_for(lambda s: len(s.brokers) == len(broker_ids), 5)

    async def share_group_keys(self) -> list[bytes]:
        result = await self.store.range_prefix(KS.share_groups_prefix)
        return [kv.key for kv in result.kvs]


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
                yield Harness(app, store, admin, http)
    finally:
        await store.aclose()


async def test_create_makes_the_state_topic_then_the_group(harness: Harness) -> None:
    await harness.add_brokers(1, 2, 3, 4)
    await harness.admin.create_topic("dlq")
    created = await harness.admin.create_share_group(
        CreateShareGroupRequest(name="orders", dead_letter_topic="dlq", lock_duration_ms=5_000)
    )
    assert (created.name, created.dead_letter_topic) == ("orders", "dlq")
    assert (created.max_delivery_attempts, created.lock_duration_ms) == (5, 5_000)
    assert (created.offset_reset, created.deleting) == ("latest", False)

    state = await harness.admin.describe_topic(SHARE_STATE_TOPIC)
    assert (state.partition_count, state.replication_factor) == (16, 3)
    assert state.configs == {"cleanup.policy": "compact", "min.insync.replicas": "2"}

    kv = await harness.store.get(KS.share_group("orders"))
    assert kv is not None
    assert ShareGroupRecord.decode(kv.value).dead_letter_topic == "dlq"
    assert await harness.admin.describe_share_group("orders") == created
    listed = await harness.admin.list_share_groups()
    assert [g.name for g in listed.share_groups] == ["orders"]


async def test_a_small_cluster_gets_a_smaller_state_topic(harness: Harness) -> None:
    await harness.add_brokers(1)
    await harness.admin.create_share_group(CreateShareGroupRequest(name="g"))
    state = await harness.admin.describe_topic(SHARE_STATE_TOPIC)
    assert (state.replication_factor, state.configs) == (1, {"cleanup.policy": "compact"})


async def test_refusals_have_their_codes_and_write_nothing(harness: Harness) -> None:
    await harness.add_brokers(1)
    cases: list[tuple[dict[str, object], type[Exception], int]] = [
        ({"name": "bad name"}, InvalidGroupIdError, 400),
        ({"name": "g", "max_delivery_attempts": 101}, InvalidConfigError, 400),
        ({"name": "g", "lock_duration_ms": 999}, InvalidConfigError, 400),
        ({"name": "g", "dead_letter_topic": "nope"}, UnknownTopicOrPartitionError, 404),
        ({"name": "g", "dead_letter_topic": SHARE_STATE_TOPIC}, InvalidTopicError, 400),
        ({"name": "g", "offset_reset": "middle"}, InvalidRequestError, 400),
        ({"name": "g", "colour": "red"}, InvalidRequestError, 400),
    ]
    for body, error, status in cases:
        response = await harness.http.post("/admin/v1/share-groups", json=body)
        assert response.status_code == status, body
        assert response.json()["code"] == error.code, body  # type: ignore[attr-defined]
    response = await harness.http.post(
        "/admin/v1/share-groups", json={"name": "g", "lock_duration_ms": 0}
    )
    assert response.json()["details"] == {
        "config": "lock_duration_ms",
        "value": 0,
        "min": 1_000,
        "max": 3_600_000,
    }
    for method in ("GET", "PATCH", "DELETE"):
        response = await harness.http.request(method, "/admin/v1/share-groups/bad%20name", json={})
        assert (response.status_code, response.json()["code"]) == (404, "GROUP_ID_NOT_FOUND")
    assert await harness.share_group_keys() == []
    assert SHARE_STATE_TOPIC not in {t.name for t in (await harness.admin.list_topics()).topics}


async def test_a_taken_name_is_a_conflict(harness: Harness) -> None:
    await harness.add_brokers(1)
    first = await harness.admin.create_share_group(CreateShareGroupRequest(name="g"))
    with pytest.raises(DuplicateResourceError):
        await harness.admin.create_share_group(
            CreateShareGroupRequest(name="g", max_delivery_attempts=2)
        )
    assert await harness.admin.describe_share_group("g") == first


async def test_users_cannot_create_reserved_topics(harness: Harness) -> None:
    await harness.add_brokers(1)
    with pytest.raises(InvalidTopicError, match="reserved"):
        await harness.admin.create_topic(SHARE_STATE_TOPIC)
    with pytest.raises(InvalidTopicError):
        await harness.admin.create_topic("__yak_mine")


async def test_alter_changes_only_what_the_body_names(harness: Harness) -> None:
    await harness.add_brokers(1)
    await harness.admin.create_topic("dlq")
    await harness.admin.create_share_group(
        CreateShareGroupRequest(name="g", dead_letter_topic="dlq", max_delivery_attempts=3)
    )
    altered = await harness.admin.alter_share_group(
        "g", AlterShareGroupRequest(lock_duration_ms=60_000, offset_reset="earliest")
    )
    assert (altered.dead_letter_topic, altered.max_delivery_attempts) == ("dlq", 3)
    assert (altered.lock_duration_ms, altered.offset_reset) == (60_000, "earliest")
    cleared = await harness.admin.alter_share_group(
        "g", AlterShareGroupRequest(dead_letter_topic=None)
    )
    assert cleared.dead_letter_topic is None
    assert cleared.lock_duration_ms == 60_000
    with pytest.raises(InvalidConfigError):
        await harness.admin.alter_share_group("g", AlterShareGroupRequest(max_delivery_attempts=0))
    with pytest.raises(GroupIdNotFoundError):
        await harness.admin.alter_share_group("nope", AlterShareGroupRequest(lock_duration_ms=1000))
    assert await harness.admin.describe_share_group("g") == cleared


async def test_delete_removes_the_group(harness: Harness) -> None:
    await harness.add_brokers(1)
    await harness.admin.create_share_group(CreateShareGroupRequest(name="g"))
    deleted = await harness.admin.delete_share_group("g")
    assert (deleted.name, deleted.group.deleting) == ("g", True)
    assert await harness.share_group_keys() == []
    for call in (harness.admin.describe_share_group, harness.admin.delete_share_group):
        with pytest.raises(GroupIdNotFoundError):
            await call("g")
    assert (await harness.admin.list_share_groups()).share_groups == []
    # The name is free again; the state topic stays.
    await harness.admin.create_share_group(CreateShareGroupRequest(name="g"))
    await harness.admin.describe_topic(SHARE_STATE_TOPIC)


async def test_a_half_done_delete_is_finished_by_the_next(harness: Harness) -> None:
    await harness.add_brokers(1)
    created = await harness.admin.create_share_group(CreateShareGroupRequest(name="g"))
    marked = ShareGroupRecord(name="g", created_at_ms=created.created_at_ms, deleting=True)
    await harness.store.put(KS.share_group("g"), marked.encode())
    coordinator: Coordinator = harness.app.state.coordinator
    await coordinator.cache.wait_for(lambda s: s.share_groups["g"].deleting, 5)
    assert (await harness.admin.describe_share_group("g")).deleting
    with pytest.raises(DuplicateResourceError, match="being deleted"):
        await harness.admin.create_share_group(CreateShareGroupRequest(name="g"))
    with pytest.raises(GroupIdNotFoundError, match="being deleted"):
        await harness.admin.alter_share_group("g", AlterShareGroupRequest(lock_duration_ms=2_000))
    await harness.admin.delete_share_group("g")
    assert await harness.share_group_keys() == []


async def test_no_broker_means_no_state_topic_and_no_group(harness: Harness) -> None:
    response = await harness.http.post("/admin/v1/share-groups", json={"name": "g"})
    assert response.status_code == 400
    assert "no broker" in response.json()["message"]
    assert await harness.share_group_keys() == []
