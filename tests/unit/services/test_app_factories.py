"""Each service's app factory builds an app that answers its health endpoints."""

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext

import httpx
import pytest
from fastapi import FastAPI

from yak.metadata.memory_store import MemoryMetadataStore
from yak_broker.app import create_app as broker_app
from yak_console.app import create_app as console_app
from yak_coordinator.app import create_app as coordinator_app
from yak_coordinator.settings import CoordinatorSettings
from yak_rest_proxy.app import create_app as rest_proxy_app
from yak_schema_registry.app import create_app as schema_registry_app

Started = Callable[[], AbstractAsyncContextManager[FastAPI | None]]


@asynccontextmanager
async def _coordinator() -> AsyncIterator[FastAPI]:
    """The coordinator runs its lifespan on an in-memory store (it is ready once connected)."""
    store = MemoryMetadataStore()
    app = coordinator_app(CoordinatorSettings(), store=store)
    try:
        async with app.router.lifespan_context(app):
            yield app
    finally:
        await store.aclose()


@asynccontextmanager
async def _schema_registry() -> AsyncIterator[FastAPI]:
    """The registry on an in-memory store (ready: the store answers)."""
    store = MemoryMetadataStore()
    app = schema_registry_app(store=store)
    try:
        async with app.router.lifespan_context(app):
            yield app
    finally:
        await store.aclose()


def _plain(factory: Callable[[], FastAPI]) -> Started:
    return lambda: nullcontext(factory())


@pytest.mark.parametrize(
    ("started", "service"),
    [
        (_plain(broker_app), "broker"),
        (_coordinator, "coordinator"),
        (_plain(rest_proxy_app), "rest-proxy"),
        (_plain(console_app), "console"),
        (_schema_registry, "schema-registry"),
    ],
)
async def test_health_endpoints(started: Started, service: str) -> None:
    async with started() as app:
        assert app is not None
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            health = await client.get("/healthz")
            ready = await client.get("/readyz")
            missing = await client.get("/no-such-route")
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "service": service}
    if service in ("coordinator", "schema-registry"):
        assert ready.status_code == 200
    assert missing.status_code == 404


async def test_coordinator_is_not_ready_before_it_has_started() -> None:
    app = coordinator_app()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        assert (await client.get("/healthz")).status_code == 200
        ready = await client.get("/readyz")
        admin = await client.get("/admin/v1/topics")
    assert ready.status_code == 503
    assert (admin.status_code, admin.json()["code"]) == (503, "METADATA_STORE_ERROR")
