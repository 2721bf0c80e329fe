"""The broker's internal listener (Kafka framing) and ``BrokerConnection``, in-process: answers
out of order, authentication with the cluster secret, refused requests, broken connections."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.unit.broker.broker_harness import BrokerHarness
from yak.clients.broker import BrokerClient
from yak.clients.broker_connection import BrokerConnection
from yak.errors import AuthenticationError, InvalidRequestError, NetworkError
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.protocol import kafka_wire as kw
from yak.protocol.broker_wire import (
    FetchPartition,
    FetchRequest,
    ProducePartition,
    ProduceRequest,
)
from yak.record import RecordInput, encode_batch
from yak_broker.api.internal_listener import InternalListener
from yak_broker.app import create_app
from yak_broker.settings import BrokerSettings


def batch(*values: bytes) -> bytes:
    return encode_batch([RecordInput(key=None, value=v, timestamp=1) for v in values])


def _port(broker: BrokerHarness) -> int:
    listener = broker.broker.listener
    assert listener is not None
    return listener.port


@pytest.fixture
async def connection(broker: BrokerHarness) -> AsyncIterator[BrokerConnection]:
    connection = BrokerConnection("127.0.0.1", _port(broker))
    yield connection
    await connection.aclose()


async def test_the_listener_is_advertised_in_the_registration(broker: BrokerHarness) -> None:
    registration = broker.broker._registration()
    assert registration.data_port == _port(broker)


async def test_a_parked_fetch_does_not_hold_back_a_produce_on_the_same_connection(
    broker: BrokerHarness, connection: BrokerConnection
) -> None:
    await broker.create_topic("mux")
    fetch = asyncio.create_task(
        connection.fetch(FetchRequest((FetchPartition("mux", 0, 0),), max_wait_ms=30_000), 40)
    )
    await asyncio.sleep(0.05)  # let the fetch reach the broker and park
    assert not fetch.done()
    (result,) = await connection.produce(
        ProduceRequest((ProducePartition("mux", 0, batch(b"a")),), acks=1), 5
    )
    assert result.base_offset == 0
    (fetched,) = await asyncio.wait_for(fetch, 5)  # woken by the append, answered after
    assert fetched.high_watermark == 1
    assert len(memoryview(fetched.records)) > 0


async def test_many_requests_pipelined_on_one_connection(
    broker: BrokerHarness, connection: BrokerConnection
) -> None:
    await broker.create_topic("pipe", partitions=4)
    requests = [
        connection.produce(
            ProduceRequest((ProducePartition("pipe", i % 4, batch(b"v%d" % i)),), acks=1), 5
        )
        for i in range(200)
    ]
    results = [r for answer in await asyncio.gather(*requests) for r in answer]
    assert all(r.error is None for r in results)
    offsets = sorted((r.partition, r.base_offset) for r in results)
    assert offsets == sorted((p, o) for p in range(4) for o in range(50))


async def test_acks_zero_is_not_answered_but_appended(
    broker: BrokerHarness, connection: BrokerConnection
) -> None:
    await broker.create_topic("fire")
    assert (
        await connection.produce(
            ProduceRequest((ProducePartition("fire", 0, batch(b"f")),), acks=0), 5
        )
        == ()
    )
    request = FetchRequest((FetchPartition("fire", 0, 0),), max_wait_ms=5_000)
    (fetched,) = await connection.fetch(request, 10)
    assert fetched.high_watermark == 1


async def _raw_exchange(port: int, payload: bytes) -> bytes:
    """Write ``payload`` as one frame, read one answer frame (b"" if the broker hung up)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(struct.pack(">i", len(payload)) + payload)
        await writer.drain()
        try:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
        except asyncio.IncompleteReadError:
            return b""
        return await reader.readexactly(size)
    finally:
        writer.close()


async def test_a_malformed_request_gets_a_request_level_error(broker: BrokerHarness) -> None:
    await broker.create_topic("bad")
    good = b"".join(
        bytes(memoryview(p))
        for p in kw.encode_produce_request(
            ProduceRequest((ProducePartition("bad", 0, batch(b"x")),)), 77
        )
    )
    answer = await _raw_exchange(_port(broker), good[4:-3])  # cut short
    header, body = kw.decode_response_header(answer, is_flexible=True)
    assert header.correlation_id == 77
    assert isinstance(header.error, InvalidRequestError)
    assert not body
    # Nothing of the request was appended.
    connection = BrokerConnection("127.0.0.1", _port(broker))
    try:
        (fetched,) = await connection.fetch(
            FetchRequest((FetchPartition("bad", 0, 0),), max_wait_ms=0), 5
        )
    finally:
        await connection.aclose()
    assert fetched.high_watermark == 0


async def test_an_unknown_api_is_refused_by_name(broker: BrokerHarness) -> None:
    header = struct.pack(">hhih", 3, 12, 5, 3) + b"yak" + b"\x00"  # Metadata v12
    answer = await _raw_exchange(_port(broker), header)
    decoded, _ = kw.decode_response_header(answer, is_flexible=True)
    assert isinstance(decoded.error, InvalidRequestError)
    assert "api key 3" in decoded.error.message


async def test_a_frame_above_the_limit_closes_the_connection(broker: BrokerHarness) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", _port(broker))
    try:
        writer.write(struct.pack(">i", broker.broker.settings.max_request_bytes + 10_000))
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # hung up, like Kafka
    finally:
        writer.close()


async def test_a_broken_connection_fails_its_requests_and_the_next_reconnects(
    broker: BrokerHarness, connection: BrokerConnection
) -> None:
    await broker.create_topic("drop")
    fetch = asyncio.create_task(
        connection.fetch(FetchRequest((FetchPartition("drop", 0, 0),), max_wait_ms=30_000), 40)
    )
    await asyncio.sleep(0.05)
    listener = broker.broker.listener
    assert isinstance(listener, InternalListener)
    for open_connection in list(listener._connections):
        open_connection.abort()
    with pytest.raises(NetworkError):
        await asyncio.wait_for(fetch, 5)
    (result,) = await connection.produce(
        ProduceRequest((ProducePartition("drop", 0, batch(b"again")),), acks=1), 5
    )
    assert result.error is None


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[BrokerHarness]:
    store = MemoryMetadataStore()
    settings = BrokerSettings(data_dir=tmp_path / "broker-0", cluster_secret="s3cret")
    app = create_app(settings, store_factory=lambda _url: store)
    transport = httpx.ASGITransport(app=app)
    try:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://broker") as http,
            BrokerClient("http://broker", transport=transport, cluster_secret="s3cret") as client,
        ):
            yield BrokerHarness(store, Keyspace("local"), app.state.broker, client, http, transport)
    finally:
        await store.aclose()


async def test_the_cluster_secret_is_required(secured: BrokerHarness) -> None:
    await secured.create_topic("locked")
    request = ProduceRequest((ProducePartition("locked", 0, batch(b"s")),), acks=1)
    good = BrokerConnection("127.0.0.1", _port(secured), cluster_secret="s3cret")
    wrong = BrokerConnection("127.0.0.1", _port(secured), cluster_secret="guess")
    anonymous = BrokerConnection("127.0.0.1", _port(secured))
    try:
        (result,) = await good.produce(request, 5)
        assert result.base_offset == 0
        with pytest.raises(AuthenticationError, match="refused the cluster secret"):
            await wrong.produce(request, 5)
        with pytest.raises(NetworkError):  # no SASL first: the broker hangs up
            await anonymous.produce(request, 5)
    finally:
        for connection in (good, wrong, anonymous):
            await connection.aclose()
    (fetched,) = await secured.client.fetch(
        FetchRequest((FetchPartition("locked", 0, 0),), max_wait_ms=0)
    )
    assert fetched.high_watermark == 1  # only the authenticated produce landed
