"""The reader's fetches across leaders with scripted brokers: a consumer's fetch parked at an
idle leader is taken over by its next poll (no second request), and its records come with it."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client import CollectorRegistry

from yak.clients.broker import BrokerClient
from yak.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerRegistration, PartitionState, TopicRecord
from yak.protocol.broker_models import ErrorBody, ListOffsetsResponse, OffsetResult
from yak.protocol.broker_wire import (
    FRAME_CONTENT_TYPE,
    FetchedPartition,
    decode_fetch_request,
    encode_fetch_response,
)
from yak.record import CompressionType, RecordInput, encode_batch
from yak_rest_proxy.brokers import BrokerPool
from yak_rest_proxy.consume import reader as reader_module
from yak_rest_proxy.consume.reader import Reader, _records_from
from yak_rest_proxy.metrics import PollStats

KS = Keyspace("unit")


class Brokers:
    """Broker 0 answers at once with one record; broker 1 answers once ``release`` is set."""

    def __init__(self) -> None:
        self.requests = {0: 0, 1: 0}
        self.release = asyncio.Event()

    def factory(self, url: str) -> BrokerClient:
        broker_id = int(url.rsplit(":", 1)[1]) - 9000

        async def handle(request: httpx.Request) -> httpx.Response:
            fetch = decode_fetch_request(request.content)
            self.requests[broker_id] += 1
            if broker_id == 1:
                await self.release.wait()
            parts = [
                FetchedPartition(
                    p.topic,
                    p.partition,
                    high_watermark=p.offset + 1,
                    log_start_offset=0,
                    records=encode_batch(
                        [RecordInput(value=f"b{broker_id}".encode())], base_offset=p.offset
                    ),
                )
                for p in fetch.partitions
            ]
            return httpx.Response(
                200,
                content=encode_fetch_response(parts),
                headers={"content-type": FRAME_CONTENT_TYPE},
            )

        return BrokerClient(url, transport=httpx.MockTransport(handle))


@pytest.fixture
async def cache() -> AsyncIterator[MetadataCache]:
    store = MemoryMetadataStore()
    for broker_id in (0, 1):
        registration = BrokerRegistration(
            broker_id=broker_id, host="127.0.0.1", port=9000 + broker_id, started_at_ms=0
        )
        await store.put(KS.broker(broker_id), registration.encode())
    topic = TopicRecord(name="t", topic_id="x", partitions=2, replication_factor=1, created_at_ms=0)
    await store.put(KS.topic("t"), topic.encode())
    for partition in (0, 1):
        state = PartitionState(
            topic="t",
            partition=partition,
            leader=partition,
            replicas=(partition,),
            isr=(partition,),
        )
        await store.put(KS.partition("t", partition), state.encode())
    cache = MetadataCache(store, KS)
    await cache.start()
    yield cache
    await cache.stop()
    await store.aclose()


async def test_a_parked_fetch_is_taken_over_by_the_next_poll(cache: MetadataCache) -> None:
    brokers = Brokers()
    pool = BrokerPool(cache, client_factory=brokers.factory)
    reader = Reader(cache, pool)
    try:
        first = await reader.fetch(
            [("t", 0, 0), ("t", 1, 5)], max_wait_ms=10_000, max_bytes=1000, owner="g/m"
        )
        assert [(r.partition, [x.value for x in r.records]) for r in first] == [(0, [b"b0"])]
        # Partition 0 moved on; partition 1 is asked at the same offset: its fetch is reused.
        polling = asyncio.ensure_future(
            reader.fetch(
                [("t", 0, 1), ("t", 1, 5)], max_wait_ms=10_000, max_bytes=1000, owner="g/m"
            )
        )
        second = await polling
        assert brokers.requests == {0: 2, 1: 1}
        assert [r.partition for r in second] == [0]
        brokers.release.set()
        await asyncio.sleep(0.01)  # the parked answer arrives in the background
        third = await reader.fetch(
            [("t", 0, 2), ("t", 1, 5)], max_wait_ms=0, max_bytes=1000, owner="g/m"
        )
        found = {r.partition: [x.value for x in r.records] for r in third}
        assert found[1] == [b"b1"]  # the parked fetch's record, no new request for it
        assert brokers.requests[1] == 1
    finally:
        await pool.aclose()


async def test_a_fetch_observes_its_fetch_and_decode_stages_once(cache: MetadataCache) -> None:
    registry = CollectorRegistry()
    pool = BrokerPool(cache, client_factory=Brokers().factory)
    reader = Reader(cache, pool, PollStats(registry))
    try:
        (read,) = await reader.fetch([("t", 0, 0)], max_wait_ms=0, max_bytes=1000)
    finally:
        await pool.aclose()
    assert [r.value for r in read.records] == [b"b0"]

    def count(stage: str) -> float | None:
        return registry.get_sample_value("yak_proxy_poll_stage_seconds_count", {"stage": stage})

    assert (count("fetch"), count("decode")) == (1, 1)
    assert (count("reconcile"), count("render"), count("save")) == (0, 0, 0)


async def test_an_answer_handed_out_is_not_kept_alive(cache: MetadataCache) -> None:
    """Once a poll has handed a fetch's records out, nothing holds the fetch any more (its
    forget timer refers to it weakly): the proxy's memory does not grow with what it served."""
    brokers = Brokers()
    pool = BrokerPool(cache, client_factory=brokers.factory)
    reader = Reader(cache, pool)
    try:
        polling = asyncio.ensure_future(
            reader.fetch([("t", 1, 5)], max_wait_ms=10_000, max_bytes=1000, owner="g/m")
        )
        for _ in range(100):  # a few event-loop turns until the fetch is parked
            if ("g/m", 1) in reader._parked:
                break
            await asyncio.sleep(0)
        fetch = weakref.ref(reader._parked[("g/m", 1)][1])
        brokers.release.set()
        (read,) = await polling
        assert [x.value for x in read.records] == [b"b1"]
        del read, polling
        gc.collect()
        assert ("g/m", 1) not in reader._parked
        assert fetch() is None  # the forget timer (30 s) does not keep the answer alive
    finally:
        await pool.aclose()


async def test_a_finished_fetch_that_would_overflow_the_poll_waits_for_the_next(
    cache: MetadataCache,
) -> None:
    """Both leaders answered, but their records together exceed ``max_bytes``: the poll hands
    one answer out and keeps the other for the owner's next poll, which gets it without a new
    request (nothing decoded, cut and fetched again)."""
    brokers = Brokers()
    brokers.release.set()
    pool = BrokerPool(cache, client_factory=brokers.factory)
    reader = Reader(cache, pool)
    offsets = {0: 0, 1: 0}
    try:
        polling = asyncio.ensure_future(
            reader.fetch([("t", 0, 0), ("t", 1, 0)], max_wait_ms=10_000, max_bytes=3, owner="g/m")
        )
        for _ in range(100):  # both answers arrive before the poll collects them
            parked = [reader._parked.get(("g/m", b)) for b in (0, 1)]
            if all(p is not None and p[1].done() for p in parked):
                break
            await asyncio.sleep(0)
        first = [r for r in await polling if r.records]
        assert len(first) == 1
        (handed,) = first
        offsets[handed.partition] = handed.next_offset
        kept = 1 - handed.partition
        assert ("g/m", kept) in reader._parked
        second = await reader.fetch(
            [("t", 0, offsets[0]), ("t", 1, offsets[1])], max_wait_ms=0, max_bytes=3, owner="g/m"
        )
        found = {r.partition: [x.value for x in r.records] for r in second if r.records}
        assert found[kept] == [f"b{kept}".encode()]
        assert brokers.requests[kept] == 1  # the kept answer, no second request
    finally:
        await pool.aclose()


@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.GZIP])
@pytest.mark.parametrize("max_bytes", [1, 10, 25, 100, 1 << 20])
def test_records_from_an_offset_are_at_least_one_then_up_to_max_bytes(
    compression: CompressionType, max_bytes: int
) -> None:
    values = [b"x" * n for n in (3, 0, 7, 12, 1, 40, 5)]
    keys = [None, b"k", None, b"", b"kk", None, b"key"]
    data = b"".join(
        encode_batch(
            [RecordInput(k, v) for k, v in zip(keys[i : i + 3], values[i : i + 3], strict=True)],
            base_offset=i,
            compression=compression,
        )
        for i in range(0, len(values), 3)
    )
    expected: list[int] = []
    size = 0
    for offset in range(2, len(values)):  # from offset 2, inside the first batch
        grown = size + len(keys[offset] or b"") + len(values[offset])
        if expected and grown > max_bytes:
            break
        expected.append(offset)
        size = grown
    records, counted = _records_from(memoryview(data), 2, max_bytes)
    assert [r.offset for r in records] == expected
    assert counted == size


def test_a_compressed_answer_smaller_than_max_bytes_is_still_cut_at_max_bytes() -> None:
    data = encode_batch(
        [RecordInput(value=b"x" * 2_000) for _ in range(3)], compression=CompressionType.GZIP
    )
    assert len(data) < 3_000
    records, size = _records_from(data, 0, 3_000)
    assert ([r.offset for r in records], size) == ([0], 2_000)


class OffsetBrokers:
    """Each broker answers ListOffsets with offset 10 * broker + partition; broker 1 says its
    partitions have no leader here, as a broker that just lost them does."""

    def __init__(self) -> None:
        self.asked: dict[int, list[list[str]]] = {0: [], 1: []}

    def factory(self, url: str) -> BrokerClient:
        broker_id = int(url.rsplit(":", 1)[1]) - 9000

        async def handle(request: httpx.Request) -> httpx.Response:
            named = request.url.params.get_list("partition")
            self.asked[broker_id].append(named)
            results = []
            for text in named:
                topic, partition = text.rsplit(":", 1)
                moved = ErrorBody(code="NOT_LEADER_OR_FOLLOWER", message="moved")
                result = OffsetResult(
                    topic=topic,
                    partition=int(partition),
                    timestamp=-1,
                    offset=10 * broker_id,
                    error=moved if broker_id == 1 else None,
                )
                results.append(result)
            body = ListOffsetsResponse(partitions=results).model_dump_json()
            return httpx.Response(200, content=body, headers={"content-type": "application/json"})

        return BrokerClient(url, transport=httpx.MockTransport(handle))


async def test_offsets_of_many_partitions_take_one_request_per_leader(
    cache: MetadataCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    brokers = OffsetBrokers()
    pool = BrokerPool(cache, client_factory=brokers.factory)
    reader = Reader(cache, pool)
    try:
        found = await reader.list_offsets_many([("t", 0), ("t", 1), ("gone", 0)], "latest")
        monkeypatch.setattr(reader_module, "_OFFSETS_PER_REQUEST", 1)
        again = await reader.list_offsets_many([("t", 0), ("t", 0)], "earliest")
    finally:
        await pool.aclose()

    first = found[("t", 0)]
    assert isinstance(first, OffsetResult)
    assert first.offset == 0
    assert isinstance(found[("t", 1)], NotLeaderOrFollowerError)
    assert isinstance(found[("gone", 0)], UnknownTopicOrPartitionError)
    assert brokers.asked == {0: [["t:0"], ["t:0"], ["t:0"]], 1: [["t:1"]]}
    assert set(again) == {("t", 0)}
