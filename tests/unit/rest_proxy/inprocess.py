"""A whole produce/consume path in process: the proxy app and a real broker app (reached through
an ASGI transport) on one in-memory metadata store, the broker hosting topic ``t`` (one
partition). For tests that need the proxy's real routes, producer and reader end to end."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from fastapi import FastAPI

from tests.unit.broker.broker_harness import BrokerHarness
from yak.clients.broker import BrokerClient
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak_broker.app import create_app as create_broker
from yak_broker.settings import BrokerSettings
from yak_rest_proxy.app import create_app as create_proxy
from yak_rest_proxy.settings import ProxySettings

__all__ = ["proxy_and_broker"]


@asynccontextmanager
async def proxy_and_broker(
    folder: Path, settings: ProxySettings
) -> AsyncIterator[tuple[httpx.AsyncClient, FastAPI]]:
    """A client of the proxy and the proxy app, once topic ``t`` is producible."""
    store = MemoryMetadataStore()
    broker_app = create_broker(
        BrokerSettings(data_dir=folder / "broker-0"), store_factory=lambda _url: store
    )
    to_broker = httpx.ASGITransport(app=broker_app)
    proxy_app = create_proxy(
        settings,
        store=store,
        broker_client_factory=lambda url: BrokerClient(url, transport=to_broker),
    )
    try:
        async with (
            broker_app.router.lifespan_context(broker_app),
            httpx.AsyncClient(transport=to_broker, base_url="http://broker") as http,
            BrokerClient("http://broker", transport=to_broker) as client,
        ):
            broker = BrokerHarness(
                store, Keyspace("local"), broker_app.state.broker, client, http, to_broker
            )
            await broker.create_topic("t")
            async with (
                proxy_app.router.lifespan_context(proxy_app),
                httpx.AsyncClient(
                    transport=httpx.ASGITransport(app=proxy_app), base_url="http://proxy"
                ) as proxy_client,
            ):
                await proxy_app.state.runtime.cache.wait_for(
                    lambda snapshot: ("t", 0) in snapshot.partitions, 5
                )
                yield proxy_client, proxy_app
    finally:
        await store.aclose()
