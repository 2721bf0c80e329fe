"""``/api/v1/share-groups`` in process: the proxy app forwarding to a coordinator app on one
in-memory metadata store, driven by the SDK's ``AsyncAdmin``; the proxy's cache shows each
write when the answer arrives."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from yak.clients.admin import AdminClient
from yak.errors import (
    DuplicateResourceError,
    GroupIdNotFoundError,
    InvalidConfigError,
    InvalidGroupIdError,
    UnknownTopicOrPartitionError,
)
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerRegistration
from yak.sdk.admin import AsyncAdmin
from yak_coordinator.app import create_app as create_coordinator
from yak_coordinator.settings import CoordinatorSettings
from yak_rest_proxy.app import create_app as create_proxy
from yak_rest_proxy.security.route_acls import AUDITED, ROUTE_ACLS
from yak_rest_proxy.settings import ProxySettings


@pytest.fixture
async def proxy() -> AsyncIterator[tuple[AsyncAdmin, FastAPI]]:
    store = MemoryMetadataStore()
    broker = BrokerRegistration(broker_id=0, host="127.0.0.1", port=9500, started_at_ms=1)
    await store.put(Keyspace("local").broker(0), broker.encode())
    coordinator_app = create_coordinator(CoordinatorSettings(admin_wait_s=5.0), store=store)
    proxy_app = create_proxy(ProxySettings(), store=store)
    try:
        async with (
            coordinator_app.router.lifespan_context(coordinator_app),
            proxy_app.router.lifespan_context(proxy_app),
        ):
            await asyncio.wait_for(coordinator_app.state.coordinator.wait_controller(), 5)
            runtime = proxy_app.state.runtime
            snapshot = await runtime.cache.wait_for(lambda s: s.controller is not None, 5)
            assert snapshot.controller is not None
            # The proxy reaches the controller at its URL; here, through the ASGI transport.
            runtime._admin = AdminClient(
                snapshot.controller.url, transport=httpx.ASGITransport(app=coordinator_app)
            )
            transport = httpx.ASGITransport(app=proxy_app)
            async with AsyncAdmin("http://proxy", transport=transport) as admin:
                yield admin, proxy_app
    finally:
        await store.aclose()


async def test_create_alter_list_delete(proxy: tuple[AsyncAdmin, FastAPI]) -> None:
    admin, app = proxy
    await admin.create_topic("dlq")
    created = await admin.create_share_group("orders", dead_letter_topic="dlq")
    assert (created.name, created.max_delivery_attempts, created.lock_duration_ms) == (
        "orders",
        5,
        30_000,
    )
    assert app.state.runtime.cache.snapshot.share_groups["orders"].dead_letter_topic == "dlq"

    altered = await admin.alter_share_group(
        "orders", max_delivery_attempts=7, offset_reset="earliest"
    )
    assert (altered.dead_letter_topic, altered.max_delivery_attempts) == ("dlq", 7)
    assert app.state.runtime.cache.snapshot.share_groups["orders"].max_delivery_attempts == 7
    cleared = await admin.alter_share_group("orders", clear_dead_letter_topic=True)
    assert (cleared.dead_letter_topic, cleared.offset_reset) == (None, "earliest")

    described = await admin.describe_share_group("orders")
    assert described.model_copy(update={"live": None}) == cleared
    # The one registered broker is not running here: listed as not answering, nothing summed.
    assert described.live is not None
    assert [e.broker_id for e in described.live.errors] == [0]
    assert (described.live.partitions, described.live.totals.acquired) == ([], 0)
    assert [g.name for g in (await admin.list_share_groups()).share_groups] == ["orders"]
    assert "__yak_share_state" in {t.name for t in (await admin.list_topics()).topics}

    deleted = await admin.delete_share_group("orders")
    assert deleted.name == "orders"
    assert "orders" not in app.state.runtime.cache.snapshot.share_groups
    with pytest.raises(GroupIdNotFoundError):
        await admin.describe_share_group("orders")


async def test_errors_come_back_typed(proxy: tuple[AsyncAdmin, FastAPI]) -> None:
    admin, _ = proxy
    with pytest.raises(InvalidConfigError, match="between 1 and 100"):
        await admin.create_share_group("g", max_delivery_attempts=0)
    with pytest.raises(UnknownTopicOrPartitionError):
        await admin.create_share_group("g", dead_letter_topic="missing")
    with pytest.raises(InvalidGroupIdError):
        await admin.create_share_group("bad name!")
    with pytest.raises(GroupIdNotFoundError):
        await admin.describe_share_group("bad name!")
    await admin.create_share_group("g")
    with pytest.raises(DuplicateResourceError):
        await admin.create_share_group("g")
    with pytest.raises(GroupIdNotFoundError):
        await admin.delete_share_group("nope")


def test_every_share_group_route_is_guarded_and_its_writes_audited() -> None:
    admin = ("/api/v1/share-groups", "/api/v1/share-groups/{group}")
    routes = {key for key in ROUTE_ACLS if key[1] in admin}
    assert len(routes) == 5
    # The records' routes (acquire, acknowledgements, stream, ws) are guarded too.
    records = {key for key in ROUTE_ACLS if key[1].startswith("/api/v1/share-groups/{group}/")}
    assert {path.rsplit("/", 1)[1] for _, path in records} == {
        "acquire",
        "acknowledgements",
        "stream",
        "ws",
    }
    writes = {key for key in routes if key[0] != "GET"}
    assert writes == {
        ("POST", "/api/v1/share-groups"),
        ("PATCH", "/api/v1/share-groups/{group}"),
        ("DELETE", "/api/v1/share-groups/{group}"),
    }
    assert writes <= AUDITED
