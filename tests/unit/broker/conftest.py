"""In-process broker fixtures: the real app (lifespan included) on an in-memory metadata store.

``broker`` yields a ``BrokerHarness`` (``broker_harness.py``): the app served through
``httpx.ASGITransport``, a ``BrokerClient`` on it, and helpers that stand in for the
coordinator. Tests import the harness as ``tests.unit.broker.broker_harness`` (the repository
root is on ``sys.path`` through ``pythonpath`` in the pytest config).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.unit.broker.broker_harness import BrokerHarness
from yak.clients.broker import BrokerClient
from yak.clients.broker_connection import BrokerConnection
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak_broker.app import create_app
from yak_broker.settings import BrokerSettings


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerHarness]:
    store = MemoryMetadataStore()
    # No controller runs here: a controlled shutdown at the end of a test whose broker leads a
    # partition with another registered in-sync replica would wait its whole timeout (10 s) for
    # leaderships nobody moves. Its own tests (test_broker_controlled_shutdown) have a fixture
    # of their own.
    settings = BrokerSettings(
        data_dir=tmp_path / "broker-0",
        max_request_bytes=4 * 1024 * 1024,
        controlled_shutdown_timeout_s=0.0,
    )
    app = create_app(settings, store_factory=lambda _url: store)
    transport = httpx.ASGITransport(app=app)
    try:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://broker") as http,
            BrokerClient("http://broker", transport=transport) as client,
        ):
            yield BrokerHarness(store, Keyspace("local"), app.state.broker, client, http, transport)
    finally:
        await store.aclose()


@pytest.fixture(params=["http", "kafka"])
async def broker_on_each_transport(
    request: pytest.FixtureRequest, broker: BrokerHarness
) -> AsyncIterator[BrokerHarness]:
    """``broker`` with its client on HTTP, then on the internal listener (Kafka framing)."""
    if request.param == "http":
        yield broker
        return
    listener = broker.broker.listener
    assert listener is not None
    async with BrokerClient(
        "http://127.0.0.1", transport=broker.transport, data_port=listener.port
    ) as client:
        yield dataclasses.replace(broker, client=client)


@pytest.fixture
async def connection(broker: BrokerHarness) -> AsyncIterator[BrokerConnection]:
    """A connection to ``broker``'s internal listener (Kafka framing)."""
    listener = broker.broker.listener
    assert listener is not None
    connection = BrokerConnection("127.0.0.1", listener.port)
    yield connection
    await connection.aclose()
