"""The proxy's batching producer against scripted brokers (httpx mock transports) and an
in-memory metadata store: retries resend the same bytes to the new leader, failures give their
sequence numbers back, refused sequences move to a fresh producer id, lingering batches."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import httpx
import pytest
from prometheus_client import CollectorRegistry

from yak.clients.broker import BrokerClient
from yak.errors import (
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceError,
    YakError,
)
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerRegistration, PartitionState, TopicRecord
from yak.metadata.producer_ids import ProducerIds
from yak.protocol.broker_wire import (
    PartitionError,
    ProduceResult,
    decode_produce_request,
    encode_produce_response,
)
from yak.record import RecordInput, decode_batch, encode_batch
from yak_rest_proxy.brokers import BrokerPool
from yak_rest_proxy.metrics import ProduceStats
from yak_rest_proxy.produce.accumulator import ProducedRecord, Result
from yak_rest_proxy.produce.producer import Producer

KS = Keyspace("unit")
Answer = Callable[[int, bytes], ProduceResult]


@dataclass
class FakeBrokers:
    """Each broker answers produce requests with ``answer(broker_id, batch)``."""

    answer: Answer
    seen: list[tuple[int, bytes]] = field(default_factory=list)

    def factory(self, url: str) -> BrokerClient:
        broker_id = int(url.rsplit(":", 1)[1]) - 9000

        def handle(request: httpx.Request) -> httpx.Response:
            produce = decode_produce_request(request.content)
            results = []
            for part in produce.partitions:
                batch = bytes(part.records)
                self.seen.append((broker_id, batch))
                results.append(self.answer(broker_id, batch))
            return httpx.Response(
                200,
                content=encode_produce_response(results),
                headers={"content-type": "application/json"},
            )

        return BrokerClient(url, transport=httpx.MockTransport(handle))


async def set_leader(store: MemoryMetadataStore, leader: int) -> None:
    state = PartitionState(
        topic="t", partition=0, leader=leader, leader_epoch=leader, replicas=(0, 1), isr=(0, 1)
    )
    await store.put(KS.partition("t", 0), state.encode())


@pytest.fixture
async def store() -> AsyncIterator[MemoryMetadataStore]:
    store = MemoryMetadataStore()
    for broker_id in (0, 1):
        registration = BrokerRegistration(
            broker_id=broker_id, host="127.0.0.1", port=9000 + broker_id, started_at_ms=0
        )
        await store.put(KS.broker(broker_id), registration.encode())
    topic = TopicRecord(name="t", topic_id="x", partitions=1, replication_factor=2, created_at_ms=0)
    await store.put(KS.topic("t"), topic.encode())
    await set_leader(store, 0)
    yield store
    await store.aclose()


async def make_producer(
    store: MemoryMetadataStore, brokers: FakeBrokers, linger_ms: float = 0, timeout_ms: int = 5_000
) -> tuple[Producer, MetadataCache, BrokerPool]:
    cache = MetadataCache(store, KS)
    await cache.start()
    pool = BrokerPool(cache, client_factory=brokers.factory)
    producer = Producer(
        cache,
        pool,
        ProducerIds(lambda: store, KS),
        linger_ms=linger_ms,
        delivery_timeout_ms=timeout_ms,
    )
    return producer, cache, pool


async def close(producer: Producer, cache: MetadataCache, pool: BrokerPool) -> None:
    await producer.aclose()
    await cache.stop()
    await pool.aclose()


def ok(base: int) -> Answer:
    def answer(_broker: int, _batch: bytes) -> ProduceResult:
        return ProduceResult("t", 0, base_offset=base)

    return answer


async def landed(sent: asyncio.Future[list[Result]]) -> list[ProducedRecord]:
    """Where the records of one ``send`` landed; the first record's error is raised."""
    results = await sent
    for result in results:
        if isinstance(result, YakError):
            raise result
    return [r for r in results if isinstance(r, ProducedRecord)]


def values(n: int) -> list[RecordInput]:
    return [RecordInput(value=f"v{i}".encode()) for i in range(n)]


async def test_a_new_leader_gets_the_same_bytes(store: MemoryMetadataStore) -> None:
    def answer(broker_id: int, _batch: bytes) -> ProduceResult:
        if broker_id == 0:
            error = PartitionError.of(NotLeaderOrFollowerError("moved"))
            asyncio.get_running_loop().create_task(set_leader(store, 1))
            return ProduceResult("t", 0, error=error)
        return ProduceResult("t", 0, base_offset=40)

    brokers = FakeBrokers(answer)
    producer, cache, pool = await make_producer(store, brokers)
    try:
        results = await landed(producer.send("t", 0, values(3)))
    finally:
        await close(producer, cache, pool)
    assert [r.offset for r in results] == [40, 41, 42]
    assert brokers.seen[0][0] == 0
    assert brokers.seen[-1][0] == 1
    assert len({batch for _, batch in brokers.seen}) == 1  # every retry: the same bytes
    header = decode_batch(brokers.seen[0][1]).header
    assert header.producer_id >= 0
    assert header.base_sequence == 0


async def test_sequences_continue_and_are_given_back_after_a_refusal(
    store: MemoryMetadataStore,
) -> None:
    refuse = [False, True, False]

    def answer(_broker: int, _batch: bytes) -> ProduceResult:
        if refuse.pop(0):
            return ProduceResult("t", 0, error=PartitionError.of(MessageTooLargeError("big")))
        return ProduceResult("t", 0, base_offset=0)

    brokers = FakeBrokers(answer)
    producer, cache, pool = await make_producer(store, brokers)
    try:
        await landed(producer.send("t", 0, values(2)))
        with pytest.raises(MessageTooLargeError):
            await landed(producer.send("t", 0, values(3)))
        await landed(producer.send("t", 0, values(1)))
    finally:
        await close(producer, cache, pool)
    sequences = [decode_batch(batch).header.base_sequence for _, batch in brokers.seen]
    assert sequences == [0, 2, 2]  # the refused batch's numbers were reused


async def test_a_refused_sequence_moves_to_a_fresh_producer_id(store: MemoryMetadataStore) -> None:
    first = [True]

    def answer(_broker: int, _batch: bytes) -> ProduceResult:
        if first and first.pop():
            return ProduceResult("t", 0, error=PartitionError.of(OutOfOrderSequenceError("gap")))
        return ProduceResult("t", 0, base_offset=7)

    brokers = FakeBrokers(answer)
    producer, cache, pool = await make_producer(store, brokers)
    try:
        results = await landed(producer.send("t", 0, values(2)))
    finally:
        await close(producer, cache, pool)
    assert [r.offset for r in results] == [7, 8]
    headers = [decode_batch(batch).header for _, batch in brokers.seen]
    assert headers[0].producer_id != headers[1].producer_id
    assert headers[1].base_sequence == 0


async def test_linger_gathers_concurrent_sends_into_one_batch(store: MemoryMetadataStore) -> None:
    brokers = FakeBrokers(ok(0))
    producer, cache, pool = await make_producer(store, brokers, linger_ms=20)
    try:
        futures = [producer.send("t", 0, values(2)) for _ in range(5)]
        await asyncio.gather(*futures)
    finally:
        await close(producer, cache, pool)
    assert len(brokers.seen) == 1
    assert len(decode_batch(brokers.seen[0][1]).records) == 10


async def test_undeliverable_records_time_out(store: MemoryMetadataStore) -> None:
    def answer(_broker: int, _batch: bytes) -> ProduceResult:
        return ProduceResult("t", 0, error=PartitionError.of(NotLeaderOrFollowerError("nobody")))

    producer, cache, pool = await make_producer(store, FakeBrokers(answer), timeout_ms=300)
    try:
        with pytest.raises(YakError, match="not delivered in time"):
            await landed(producer.send("t", 0, values(1)))
    finally:
        await close(producer, cache, pool)


async def test_a_record_that_cannot_be_encoded_fails_alone(store: MemoryMetadataStore) -> None:
    brokers = FakeBrokers(ok(3))
    producer, cache, pool = await make_producer(store, brokers)
    try:
        bad = producer.send("t", 0, [RecordInput(value=b"x", timestamp=2**63)])
        with pytest.raises(YakError):
            await landed(bad)
        good = await landed(producer.send("t", 0, values(1)))  # the sender lives on
    finally:
        await close(producer, cache, pool)
    assert [r.offset for r in good] == [3]
    assert decode_batch(brokers.seen[0][1]).header.base_sequence == 0  # no number was used


async def test_rounds_to_one_broker_overlap(store: MemoryMetadataStore) -> None:
    """A ready partition does not wait for another partition's answer from the same broker."""
    topic = TopicRecord(name="u", topic_id="y", partitions=2, replication_factor=2, created_at_ms=0)
    await store.put(KS.topic("u"), topic.encode())
    for partition in (0, 1):
        state = PartitionState(
            topic="u", partition=partition, leader=0, leader_epoch=0, replicas=(0, 1), isr=(0, 1)
        )
        await store.put(KS.partition("u", partition), state.encode())
    first_sent, second_answered = asyncio.Event(), asyncio.Event()
    order: list[int] = []

    async def handle(request: httpx.Request) -> httpx.Response:
        (part,) = decode_produce_request(request.content).partitions
        if part.partition == 0:  # held until partition 1's round, sent after it, is answered
            first_sent.set()
            await asyncio.wait_for(second_answered.wait(), 5)
        order.append(part.partition)
        result = ProduceResult("u", part.partition, base_offset=10 * part.partition)
        return httpx.Response(
            200,
            content=encode_produce_response([result]),
            headers={"content-type": "application/json"},
        )

    def factory(url: str) -> BrokerClient:
        return BrokerClient(url, transport=httpx.MockTransport(handle))

    cache = MetadataCache(store, KS)
    await cache.start()
    pool = BrokerPool(cache, client_factory=factory)
    producer = Producer(cache, pool, ProducerIds(lambda: store, KS), linger_ms=0, max_in_flight=2)
    try:
        first = producer.send("u", 0, values(1))
        await asyncio.wait_for(first_sent.wait(), 5)  # partition 0's round is in flight
        assert not first.done()
        second = await landed(producer.send("u", 1, values(1)))
        second_answered.set()
        assert [r.offset for r in await landed(first)] == [0]
    finally:
        await close(producer, cache, pool)
    assert second == [ProducedRecord(1, 10, second[0].timestamp)]
    assert order == [1, 0]


@dataclass
class HeldBroker:
    """Broker 0 answering every produce request at once, except the first, held until
    ``release`` is set; ``requests`` keeps each request's (topic, partition, record count)."""

    topic: str
    release: asyncio.Event = field(default_factory=asyncio.Event)
    first_in: asyncio.Event = field(default_factory=asyncio.Event)
    requests: list[list[tuple[int, int]]] = field(default_factory=list)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        parts = decode_produce_request(request.content).partitions
        self.requests.append(
            [(part.partition, len(decode_batch(bytes(part.records)).records)) for part in parts]
        )
        if len(self.requests) == 1:
            self.first_in.set()
            await asyncio.wait_for(self.release.wait(), 5)
        results = [ProduceResult(self.topic, part.partition, base_offset=0) for part in parts]
        return httpx.Response(
            200,
            content=encode_produce_response(results),
            headers={"content-type": "application/json"},
        )

    def factory(self, url: str) -> BrokerClient:
        return BrokerClient(url, transport=httpx.MockTransport(self.handle))


async def two_partitions(store: MemoryMetadataStore) -> None:
    topic = TopicRecord(name="u", topic_id="y", partitions=2, replication_factor=2, created_at_ms=0)
    await store.put(KS.topic("u"), topic.encode())
    for partition in (0, 1):
        state = PartitionState(
            topic="u", partition=partition, leader=0, leader_epoch=0, replicas=(0, 1), isr=(0, 1)
        )
        await store.put(KS.partition("u", partition), state.encode())


async def held_producer(
    store: MemoryMetadataStore, broker: HeldBroker, *, linger_ms: float, max_in_flight: int = 1
) -> tuple[Producer, MetadataCache, BrokerPool]:
    await two_partitions(store)
    cache = MetadataCache(store, KS)
    await cache.start()
    pool = BrokerPool(cache, client_factory=broker.factory)
    producer = Producer(
        cache,
        pool,
        ProducerIds(lambda: store, KS),
        linger_ms=linger_ms,
        max_in_flight=max_in_flight,
    )
    return producer, cache, pool


async def test_an_idle_broker_gets_a_record_without_the_linger(
    store: MemoryMetadataStore,
) -> None:
    """Adaptive linger: nothing in flight to the leader, so the record is sent at once, long
    before a 10 s linger would have let it go."""
    broker = HeldBroker("u")
    broker.release.set()
    producer, cache, pool = await held_producer(store, broker, linger_ms=10_000)
    try:
        sent = producer.send("u", 0, values(1))
        await asyncio.wait_for(broker.first_in.wait(), 5)  # the request left, linger unspent
        assert [r.offset for r in await asyncio.wait_for(landed(sent), 5)] == [0]
    finally:
        await close(producer, cache, pool)
    assert broker.requests == [[(0, 1)]]


async def test_records_behind_a_round_in_flight_leave_together_after_its_answer(
    store: MemoryMetadataStore,
) -> None:
    """While a round to the broker is outstanding, records of the same and of another
    partition wait; its answer sends them all in one request, one batch per partition."""
    broker = HeldBroker("u")
    producer, cache, pool = await held_producer(store, broker, linger_ms=10_000)
    try:
        first = producer.send("u", 0, values(1))
        await asyncio.wait_for(broker.first_in.wait(), 5)
        behind = [
            producer.send("u", 0, values(2)),
            producer.send("u", 0, values(1)),
            producer.send("u", 1, values(3)),
        ]
        for _ in range(5):  # turns of the event loop: nothing may leave before the answer
            await asyncio.sleep(0)
        assert len(broker.requests) == 1
        assert not any(future.done() for future in behind)
        broker.release.set()
        await asyncio.wait_for(asyncio.gather(first, *behind), 5)
    finally:
        await close(producer, cache, pool)
    assert broker.requests[0] == [(0, 1)]
    assert sorted(broker.requests[1]) == [(0, 3), (1, 3)]
    assert len(broker.requests) == 2


async def test_linger_bounds_the_wait_behind_a_busy_broker(store: MemoryMetadataStore) -> None:
    """With a second round allowed, a record lingering behind an unanswered round leaves once
    its linger is spent, without that answer."""
    broker = HeldBroker("u")
    producer, cache, pool = await held_producer(store, broker, linger_ms=20, max_in_flight=2)
    try:
        first = producer.send("u", 0, values(1))
        await asyncio.wait_for(broker.first_in.wait(), 5)
        second = await asyncio.wait_for(landed(producer.send("u", 1, values(1))), 5)
        assert not first.done()  # its round is still held
        broker.release.set()
        await asyncio.wait_for(first, 5)
    finally:
        await close(producer, cache, pool)
    assert [r.partition for r in second] == [1]
    assert broker.requests == [[(0, 1)], [(1, 1)]]


async def test_a_round_observes_its_queue_sender_and_broker_stages_once(
    store: MemoryMetadataStore,
) -> None:
    registry = CollectorRegistry()
    brokers = FakeBrokers(ok(0))
    cache = MetadataCache(store, KS)
    await cache.start()
    pool = BrokerPool(cache, client_factory=brokers.factory)
    producer = Producer(
        cache, pool, ProducerIds(lambda: store, KS), linger_ms=0, stats=ProduceStats(registry)
    )
    try:
        await asyncio.gather(producer.send("t", 0, values(2)), producer.send("t", 0, values(1)))
    finally:
        await close(producer, cache, pool)
    assert len(brokers.seen) == 1  # both calls in one round
    for stage in ("queue", "sender", "broker"):
        count = registry.get_sample_value("yak_proxy_produce_stage_seconds_count", {"stage": stage})
        assert count == 1, stage
    for stage in ("read", "parse", "render"):  # the routes' stages
        count = registry.get_sample_value("yak_proxy_produce_stage_seconds_count", {"stage": stage})
        assert count == 0, stage


async def test_batches_are_byte_for_byte_encode_batch_and_split_records_of_one_send(
    store: MemoryMetadataStore,
) -> None:
    """Records queue as encoded bodies and leave in batches framed from them: each batch is
    what ``encode_batch`` writes for its records, a send larger than a batch is split at a
    record, and every record's result names its own offset."""
    brokers = FakeBrokers(ok(40))
    cache = MetadataCache(store, KS)
    await cache.start()
    pool = BrokerPool(cache, client_factory=brokers.factory)
    producer = Producer(
        cache, pool, ProducerIds(lambda: store, KS), linger_ms=0, batch_max_bytes=400
    )
    records = [
        RecordInput(f"k{i}".encode(), b"v" * 50, (("h", b"x"),) if i % 2 else (), 1_000 + i)
        for i in range(10)
    ]
    try:
        first = await landed(producer.send("t", 0, records[:7]))
        second = await landed(producer.send("t", 0, records[7:]))
    finally:
        await close(producer, cache, pool)
    batches = [batch for _, batch in brokers.seen]
    counts = [len(decode_batch(batch).records) for batch in batches]
    assert sum(counts) == 10
    assert len(counts) > 2  # 400 bytes hold a few records only
    at = 0
    for batch, count in zip(batches, counts, strict=True):
        header = decode_batch(batch).header
        expected = encode_batch(
            records[at : at + count],
            producer_id=header.producer_id,
            producer_epoch=0,
            base_sequence=header.base_sequence,
        )
        assert batch == expected
        at += count
    assert [r.timestamp for r in first + second] == [r.timestamp for r in records]
    # Every batch is answered at base offset 40: each record's offset is 40 + its place.
    assert [r.offset for r in first + second] == [40 + i for n in counts for i in range(n)]


async def test_batches_are_capped_by_the_segment_size(store: MemoryMetadataStore) -> None:
    """A topic whose segments are smaller than ``max.message.bytes``: the records of one send
    leave in batches that each fit in a segment (the broker refuses a larger request), and all
    of them land."""
    topic = TopicRecord(
        name="t",
        topic_id="x",
        partitions=1,
        replication_factor=2,
        created_at_ms=0,
        configs={"segment.bytes": "4096"},
    )
    await store.put(KS.topic("t"), topic.encode())

    def answer(_broker: int, batch: bytes) -> ProduceResult:
        if len(batch) > 4096:  # the broker's refusal (log_validator)
            error = MessageTooLargeError(f"request of {len(batch)} bytes does not fit")
            return ProduceResult("t", 0, error=PartitionError.of(error))
        return ProduceResult("t", 0, base_offset=0)

    brokers = FakeBrokers(answer)
    producer, cache, pool = await make_producer(store, brokers)
    try:
        records = [RecordInput(value=b"v" * 1000) for _ in range(20)]
        assert len(await landed(producer.send("t", 0, records))) == 20
    finally:
        await close(producer, cache, pool)
    sizes = [len(batch) for _, batch in brokers.seen]
    assert len(sizes) >= 5
    assert max(sizes) <= 4096
