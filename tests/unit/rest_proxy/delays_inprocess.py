"""The proxy and a real broker in process (as ``inprocess.proxy_and_broker``), hosting topic
``d`` with ``delayed.delivery.enable=true`` and topic ``t`` without: for the delay tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from tests.unit.broker.broker_harness import BrokerHarness
from yak.clients.broker import BrokerClient
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.topic_config import DELAYED_DELIVERY_ENABLE, DELAYED_DELIVERY_MAX_MS
from yak_broker.app import create_app as create_broker
from yak_broker.settings import BrokerSettings
from yak_rest_proxy.app import create_app as create_proxy
from yak_rest_proxy.settings import ProxySettings

__all__ = ["DAY_MS", "proxy_with_delays"]

DAY_MS = 86_400_000


@asynccontextmanager
async def proxy_with_delays(folder: Path) -> AsyncIterator[tuple[httpx.AsyncClient, BrokerHarness]]:
    """A client of the proxy and the broker's harness, once ``d`` and ``t`` are producible
    (``d``: delays allowed up to one day)."""
    store = MemoryMetadataStore()
    broker_app = create_broker(
        BrokerSettings(data_dir=folder / "broker-0"), store_factory=lambda _url: store
    )
    to_broker = httpx.ASGITransport(app=broker_app)
    proxy_app = create_proxy(
        ProxySettings(),
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
            configs = {DELAYED_DELIVERY_ENABLE: "true", DELAYED_DELIVERY_MAX_MS: str(DAY_MS)}
            await broker.create_topic("d", configs=configs)
            await broker.create_topic("t")
            async with (
                proxy_app.router.lifespan_context(proxy_app),
                httpx.AsyncClient(
                    transport=httpx.ASGITransport(app=proxy_app), base_url="http://proxy"
                ) as proxy_client,
            ):
                await proxy_app.state.runtime.cache.wait_for(
                    lambda s: ("t", 0) in s.partitions and ("d", 0) in s.partitions, 5
                )
                yield proxy_client, broker
    finally:
        await store.aclose()
