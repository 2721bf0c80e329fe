"""The broker's stop order in process: the real app under ``DrainingServer`` (as ``main`` serves
it), an in-memory metadata store, and this test standing in for the controller.

SIGTERM marks the registration ``shutting_down`` while both listeners — HTTP and the internal
one (Kafka framing) — still append for the partitions the broker leads; once the controller
has moved one of them, both answer ``NOT_LEADER_OR_FOLLOWER`` for it and the broker keeps
serving; when the last leadership has moved it still answers so for its linger, then stops by
itself: deregistered, the port closed, the signal re-raised as uvicorn does.
"""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import FrameType

import httpx
import pytest
import uvicorn

from yak.clients.broker import BrokerClient
from yak.errors import NotLeaderOrFollowerError
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerRegistration, PartitionState, TopicRecord
from yak.metadata.store import EventKind
from yak.record import RecordInput, encode_batch
from yak.web.drain import DrainingServer
from yak_broker.app import create_app
from yak_broker.server.broker import Broker
from yak_broker.settings import BrokerSettings

KS = Keyspace("local")
TOPIC = "handover"


@pytest.fixture
def delivered() -> Iterator[list[int]]:
    """SIGTERMs that reached the process's handler (uvicorn re-raises the one it stopped for)."""
    seen: list[int] = []

    def record(sig: int, _frame: FrameType | None) -> None:
        seen.append(sig)

    previous = signal.signal(signal.SIGTERM, record)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGTERM, previous)


async def _lead(store: MemoryMetadataStore, partition: int, leader: int, epoch: int) -> int:
    state = PartitionState(
        topic=TOPIC,
        partition=partition,
        leader=leader,
        leader_epoch=epoch,
        partition_epoch=epoch,
        replicas=(0, 1),
        isr=(0, 1),
    )
    return await store.put(KS.partition(TOPIC, partition), state.encode())


class _Store(MemoryMetadataStore):
    """Stays open when the broker closes it, so the test reads what the broker left."""

    async def aclose(self) -> None:
        return None

    async def close_for_good(self) -> None:
        await super().aclose()


@pytest.fixture
async def store() -> AsyncIterator[_Store]:
    """Topic ``handover`` (2 partitions on brokers 0 and 1, led by 0) and a registration of
    broker 1, the in-sync replica the controller moves leaderships to (nothing serves it)."""
    store = _Store()
    other = BrokerRegistration(broker_id=1, host="127.0.0.1", port=1, started_at_ms=0)
    await store.put(KS.broker(1), other.encode())
    record = TopicRecord(
        name=TOPIC, topic_id="t", partitions=2, replication_factor=2, created_at_ms=0
    )
    await store.put(KS.topic(TOPIC), record.encode())
    for partition in (0, 1):
        await _lead(store, partition, leader=0, epoch=0)
    yield store
    await store.close_for_good()


async def _registration(store: MemoryMetadataStore) -> BrokerRegistration | None:
    kv = await store.get(KS.broker(0))
    return None if kv is None else BrokerRegistration.decode(kv.value)


class Served:
    """The broker app served by ``DrainingServer`` on a free port, as a task of the test's loop
    (its ``serve`` returns once the broker has stopped)."""

    def __init__(self, store: _Store, data_dir: Path) -> None:
        app = create_app(BrokerSettings(data_dir=data_dir), store_factory=lambda _: store)
        self.broker: Broker = app.state.broker
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen()
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="warning", lifespan="on", ws="none")
        self.server = DrainingServer(config, self.broker.controlled_shutdown)
        self.task = asyncio.create_task(self.server.serve(sockets=[self.socket]))

    async def sync(self, revision: int) -> None:
        """Wait until the broker's cache holds ``revision``, and apply it (as its reconcile
        loop does; applying twice changes nothing)."""
        cache = self.broker._cache
        assert cache is not None
        await cache.wait_for_revision(revision, timeout_s=5)
        await self.broker.replicas.apply(self.broker.snapshot())

    def data_port(self) -> int:
        assert self.broker.listener is not None
        return self.broker.listener.port

    async def stopped(self) -> None:
        async with asyncio.timeout(5):
            await self.task


@pytest.fixture
async def served(store: _Store, tmp_path: Path, delivered: list[int]) -> AsyncIterator[Served]:
    """The broker, served; ``delivered`` first, so that uvicorn's handlers go over it."""
    served = Served(store, tmp_path / "broker-0")
    try:
        async with httpx.AsyncClient(timeout=10) as client:  # answered once uvicorn started
            assert (await client.get(f"{served.url}/readyz")).status_code == 200
        assert served.server.started
        yield served
    finally:
        if not served.task.done():
            served.server.should_exit = True
            await served.task
        served.socket.close()


async def _shutting_down(store: _Store, since: int) -> None:
    """Wait for the broker's own write (after revision ``since``) marking its registration."""
    async with asyncio.timeout(5), store.watch_prefix(KS.broker(0), since + 1) as watch:
        async for event in watch:
            if event.kind is EventKind.PUT and BrokerRegistration.decode(event.value).shutting_down:
                return


async def _refused(url: str) -> None:
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as client:
            await client.get(f"{url}/healthz")


async def test_sigterm_hands_leaderships_over_while_both_listeners_serve(
    store: _Store, served: Served, delivered: list[int]
) -> None:
    batch = encode_batch([RecordInput(value=b"v")])
    async with (
        BrokerClient(served.url) as http,
        BrokerClient(served.url, data_port=served.data_port()) as kafka,
    ):
        since = store.revision
        signal.raise_signal(signal.SIGTERM)
        await _shutting_down(store, since)
        for client in (http, kafka):  # in controlled shutdown, still leading: appends
            for partition in (0, 1):
                await client.produce_one(TOPIC, partition, batch)

        await served.sync(await _lead(store, 0, leader=1, epoch=1))  # the controller moves 0
        for client in (http, kafka):
            with pytest.raises(NotLeaderOrFollowerError):
                await client.produce_one(TOPIC, 0, batch)
        await asyncio.sleep(0.3)  # three of uvicorn's ticks: partition 1 still to move
        assert not served.task.done()
        for client in (http, kafka):
            await client.produce_one(TOPIC, 1, batch)

        # The last one: the broker lingers (controlled_shutdown_linger_s), answering, then stops.
        await served.sync(await _lead(store, 1, leader=1, epoch=1))
        await asyncio.sleep(0.25)  # past uvicorn's next ticks: without the linger it is gone
        assert not served.task.done()
        for client in (http, kafka):
            with pytest.raises(NotLeaderOrFollowerError):
                await client.produce_one(TOPIC, 1, batch)
        await served.stopped()
    assert await _registration(store) is None  # deregistered on the way out
    assert delivered == [signal.SIGTERM]
    await _refused(served.url)


async def test_a_second_sigterm_stops_without_waiting_for_the_controller(
    store: _Store, served: Served, delivered: list[int]
) -> None:
    since = store.revision
    signal.raise_signal(signal.SIGTERM)
    await _shutting_down(store, since)  # no controller here: it would wait 10 s
    signal.raise_signal(signal.SIGTERM)
    await served.stopped()
    assert await _registration(store) is None
    assert delivered == [signal.SIGTERM]
    await _refused(served.url)
