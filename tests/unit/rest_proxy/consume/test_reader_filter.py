"""The reader with a record filter, against a scripted broker that answers at most ``CHUNK``
records a fetch: only matching records come back, ``next_offset`` is past every record scanned,
a long fetch keeps scanning from where the last answer ended, and when its time is up while a
continued fetch is still out, the read reports how far the scan got."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import orjson
import pytest

from yak.clients.broker import BrokerClient
from yak.errors import InvalidRequestError
from yak.filters import compile_filter
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerRegistration, PartitionState, TopicRecord
from yak.protocol.broker_wire import (
    FRAME_CONTENT_TYPE,
    FetchedPartition,
    decode_fetch_request,
    encode_fetch_response,
)
from yak.record import RecordInput, encode_batch
from yak_rest_proxy.brokers import BrokerPool
from yak_rest_proxy.consume.reader import Reader

KS = Keyspace("unit")
CHUNK = 5


class Broker:
    """Partition ``t``-0: ``{"n": i}`` records; a fetch answers up to ``CHUNK`` of them from its
    offset at once, or, past the end, waits for ``release`` (then answers nothing)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.offsets: list[int] = []
        self.release = asyncio.Event()

    def client(self, url: str) -> BrokerClient:
        async def handle(request: httpx.Request) -> httpx.Response:
            (part,) = decode_fetch_request(request.content).partitions
            self.offsets.append(part.offset)
            last = min(self.count, part.offset + CHUNK)
            records = b""
            if part.offset < last:
                values = [orjson.dumps({"n": n}) for n in range(part.offset, last)]
                records = encode_batch(
                    [RecordInput(value=v) for v in values], base_offset=part.offset
                )
            else:
                await self.release.wait()
            answer = FetchedPartition(
                "t", 0, high_watermark=self.count, log_start_offset=0, records=records
            )
            return httpx.Response(
                200,
                content=encode_fetch_response([answer]),
                headers={"content-type": FRAME_CONTENT_TYPE},
            )

        return BrokerClient(url, transport=httpx.MockTransport(handle))


@pytest.fixture
async def cache() -> AsyncIterator[MetadataCache]:
    store = MemoryMetadataStore()
    registration = BrokerRegistration(broker_id=0, host="127.0.0.1", port=9000, started_at_ms=0)
    await store.put(KS.broker(0), registration.encode())
    topic = TopicRecord(name="t", topic_id="x", partitions=1, replication_factor=1, created_at_ms=0)
    await store.put(KS.topic("t"), topic.encode())
    state = PartitionState(topic="t", partition=0, leader=0, replicas=(0,), isr=(0,))
    await store.put(KS.partition("t", 0), state.encode())
    cache = MetadataCache(store, KS)
    await cache.start()
    yield cache
    await cache.stop()
    await store.aclose()


async def read_with(
    cache: MetadataCache, broker: Broker, text: str, offset: int, max_wait_ms: int
) -> tuple[list[int], int]:
    """The values of ``n`` a filtered read gave, and its next offset."""
    pool = BrokerPool(cache, client_factory=broker.client)
    try:
        (read,) = await Reader(cache, pool).fetch(
            [("t", 0, offset)],
            max_wait_ms=max_wait_ms,
            max_bytes=1 << 20,
            record_filter=compile_filter(text),
        )
    finally:
        broker.release.set()  # a fetch still parked at the broker ends
        await pool.aclose()
    assert read.error is None
    return [orjson.loads(r.value or b"")["n"] for r in read.records], read.next_offset


async def test_only_matches_come_back_and_the_offset_passes_the_rest(
    cache: MetadataCache,
) -> None:
    broker = Broker(count=20)
    assert await read_with(cache, broker, "value.n in [1, 3, 9]", 0, 0) == ([1, 3], CHUNK)
    assert broker.offsets == [0]


async def test_a_read_that_matched_nothing_is_empty_but_moved(cache: MetadataCache) -> None:
    broker = Broker(count=20)
    assert await read_with(cache, broker, "value.n < 0", 7, 0) == ([], 7 + CHUNK)


async def test_a_long_read_keeps_scanning_from_where_each_answer_ended(
    cache: MetadataCache,
) -> None:
    broker = Broker(count=13)
    assert await read_with(cache, broker, "value.n == 11", 0, 10_000) == ([11], 13)
    assert broker.offsets == [0, 5, 10]  # each fetch from the end of the previous scan


async def test_when_time_is_up_the_read_reports_how_far_it_scanned(cache: MetadataCache) -> None:
    broker = Broker(count=8)
    # 0-4 and 5-7 scanned, nothing matched; the third fetch waits at the end until released.
    assert await read_with(cache, broker, "value.n < 0", 0, 50) == ([], 8)
    assert broker.offsets == [0, 5, 8]


async def test_a_filtered_read_cannot_be_raw(cache: MetadataCache) -> None:
    pool = BrokerPool(cache, client_factory=Broker(count=1).client)
    try:
        with pytest.raises(InvalidRequestError, match="raw"):
            await Reader(cache, pool).fetch(
                [("t", 0, 0)],
                max_wait_ms=0,
                max_bytes=1,
                raw=True,
                record_filter=compile_filter("key == 1"),
            )
    finally:
        await pool.aclose()
