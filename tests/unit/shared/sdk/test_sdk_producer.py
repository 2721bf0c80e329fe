"""``AsyncProducer`` against an in-process fake proxy: partitioning, batching, idempotent
retries that never duplicate, session renewal, splitting, timeouts and config checks."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.unit.shared.sdk.fake_proxy import FakeProxy
from yak.errors import (
    InvalidConfigError,
    InvalidRecordError,
    InvalidRequestError,
    KafkaTimeoutError,
    NotEnoughReplicasError,
    UnknownProducerIdError,
    UnknownTopicOrPartitionError,
)
from yak.partitioner import partition_for_key
from yak.sdk import AsyncProducer

URL = "http://proxy.test"


def producer(proxy: FakeProxy, **options: Any) -> AsyncProducer:
    options.setdefault("retry_backoff_ms", 1)
    options.setdefault("linger_ms", 0)
    return AsyncProducer(URL, transport=proxy.transport(), **options)


async def test_keyed_records_use_kafkas_partition_and_one_session() -> None:
    proxy = FakeProxy(partitions={"t": 5})
    async with producer(proxy, linger_ms=50) as p:
        futures = [await p.send("t", f"v{i}", key=f"k{i}") for i in range(50)]
        await p.flush()
        placed = [f.result() for f in futures]
    for i, metadata in enumerate(placed):
        assert metadata.partition == partition_for_key(f"k{i}".encode(), 5)
        assert proxy.logs[("t", metadata.partition)][metadata.offset].value == f"v{i}".encode()
    sessions = [r for r in proxy.requests if r.url.path.endswith("/producers")]
    assert len(sessions) == 1
    lookups = [r for r in proxy.requests if r.url.path == "/api/v1/topics/t"]
    assert len(lookups) == 1  # cached
    # linger: records of a partition went out together, sequences contiguous per partition.
    assert len(proxy.batches) <= 5
    for (_topic, _p), log in proxy.logs.items():
        assert [w.sequence for w in log] == list(range(len(log)))


async def test_keyless_records_stick_to_a_partition_per_batch() -> None:
    proxy = FakeProxy(partitions={"t": 4})
    async with producer(proxy, batch_max_bytes=200) as p:
        for _ in range(40):
            await p.send("t", b"x" * 10)  # 26 bytes each with overhead: ~7 per batch
    assert sum(len(log) for log in proxy.logs.values()) == 40
    assert len(proxy.logs) > 1  # moved on after a batch's worth of bytes


async def test_a_lost_answer_is_resent_with_the_same_sequence_and_written_once() -> None:
    proxy = FakeProxy(partitions={"t": 1})
    proxy.fail("batches", "lose")
    proxy.fail("batches", "before", NotEnoughReplicasError("ISR too small"))
    async with producer(proxy) as p:
        metadata = await p.send_and_wait("t", "once")
        second = await p.send_and_wait("t", "twice")
    assert proxy.values("t", 0) == [b"once", b"twice"]
    assert (metadata.offset, second.offset) == (0, 1)
    sent = [(b["producer_id"], b["base_sequence"]) for b in proxy.batches]
    assert sent[:3] == [sent[0]] * 3  # written, lost, refused, resent: the same stamp
    assert sent[3] == (sent[0][0], 1)
    bodies = [r.content for r in proxy.requests if r.url.path.endswith("/batches")]
    assert bodies[0] == bodies[1] == bodies[2]  # encoded once: the very same bytes resent
    assert bodies[3] != bodies[0]


async def test_an_idempotent_batch_is_one_kafka_record_batch() -> None:
    proxy = FakeProxy(partitions={"t": 1})
    async with producer(proxy, compression="zstd", linger_ms=1_000) as p:
        futures = [
            await p.send("t", b"v0", key=b"k0", headers=[("h", b"x"), ("h", None)], timestamp=7),
            await p.send("t", None, key=None, timestamp=9),
        ]
        await p.flush()
    assert [f.result().timestamp for f in futures] == [7, 9]
    (request,) = [r for r in proxy.requests if r.url.path.endswith("/batches")]
    assert request.headers["content-type"] == "application/vnd.yak.recordbatch.v2"
    assert request.url.params["acks"] == "all"
    (batch,) = proxy.batches
    assert batch["compression"] == "zstd"
    assert (batch["producer_epoch"], batch["base_sequence"]) == (0, 0)
    assert [(r["key"], r["value"], r["headers"], r["timestamp"]) for r in batch["records"]] == [
        (b"k0", b"v0", (("h", b"x"), ("h", None)), 7),
        (None, None, (), 9),
    ]


async def test_a_timestamp_out_of_range_is_refused_at_send() -> None:
    proxy = FakeProxy(partitions={"t": 1})
    async with producer(proxy) as p:
        for timestamp in (-1, 2**63):
            with pytest.raises(InvalidRecordError, match="outside"):
                await p.send("t", "x", timestamp=timestamp)
        await p.send_and_wait("t", "y", timestamp=2**63 - 1)
    assert proxy.values("t", 0) == [b"y"]


async def test_a_batch_that_cannot_be_encoded_fails_its_records_alone() -> None:
    proxy = FakeProxy(partitions={"t": 1})
    async with producer(proxy, linger_ms=1_000) as p:
        bad = await p.send("t", "x", headers=[("\ud800", b"lone surrogate")])
        await p.flush()
        with pytest.raises(InvalidRecordError, match="cannot be encoded"):
            await bad
        assert (await p.send_and_wait("t", "good")).offset == 0
    assert proxy.batches[0]["base_sequence"] == 0  # the refused batch's numbers were reused


async def test_an_unknown_producer_id_starts_a_new_session() -> None:
    proxy = FakeProxy(partitions={"t": 1})
    proxy.fail("batches", "before", UnknownProducerIdError("no state"))
    async with producer(proxy) as p:
        await p.send_and_wait("t", "a")
    first, second = proxy.batches
    assert second["producer_id"] == first["producer_id"] + 1
    assert second["base_sequence"] == 0
    assert proxy.values("t", 0) == [b"a"]


async def test_a_batch_too_large_is_split_until_it_fits() -> None:
    proxy = FakeProxy(partitions={"t": 1}, max_batch_records=3)
    async with producer(proxy, linger_ms=1_000) as p:
        futures = [await p.send("t", f"{i}") for i in range(10)]
        await p.flush()
    assert [f.result().offset for f in futures] == list(range(10))
    assert proxy.values("t", 0) == [f"{i}".encode() for i in range(10)]
    assert [w.sequence for w in proxy.logs[("t", 0)]] == list(range(10))


async def test_out_of_time_fails_with_a_timeout_and_ends_the_session() -> None:
    proxy = FakeProxy(partitions={"t": 1})
    for _ in range(1_000):
        proxy.fail("batches", "lose")
    async with producer(proxy, delivery_timeout_ms=50) as p:
        future = await p.send("t", "lost")
        with pytest.raises(KafkaTimeoutError, match="not delivered"):
            await future
        proxy.faults.clear()
        await p.send_and_wait("t", "next")
    # The lost batch may or may not have been written: the next one used a new session.
    assert proxy.batches[-1]["producer_id"] != proxy.batches[0]["producer_id"]
    assert proxy.batches[-1]["base_sequence"] == 0


async def test_retries_bound_the_attempts() -> None:
    proxy = FakeProxy(partitions={"t": 1})
    for _ in range(5):
        proxy.fail("batches", "before", NotEnoughReplicasError("ISR too small"))
    async with producer(proxy, retries=2) as p:
        with pytest.raises(KafkaTimeoutError, match="after 3 attempt"):
            await p.send_and_wait("t", "x")
    assert len(proxy.batches) == 3


async def test_a_refused_batch_fails_its_records_and_gives_back_its_numbers() -> None:
    proxy = FakeProxy(partitions={"t": 1})
    proxy.fail("batches", "before", InvalidRequestError("bad record"))
    async with producer(proxy) as p:
        with pytest.raises(InvalidRequestError, match="bad record"):
            await p.send_and_wait("t", "bad")
        await p.send_and_wait("t", "good")
    assert [b["base_sequence"] for b in proxy.batches] == [0, 0]
    assert proxy.values("t", 0) == [b"good"]


async def test_unknown_topic_and_partition_raise_at_send() -> None:
    proxy = FakeProxy(partitions={"t": 2})
    async with producer(proxy) as p:
        with pytest.raises(UnknownTopicOrPartitionError):
            await p.send("missing", "x")
        with pytest.raises(UnknownTopicOrPartitionError, match="no partition 2"):
            await p.send("t", "x", partition=2)


async def test_without_idempotence_plain_records_with_acks() -> None:
    proxy = FakeProxy(partitions={"t": 2})
    async with producer(proxy, idempotent=False, acks=1) as p:
        metadata = await p.send_and_wait("t", "v", partition=1, headers=[("h", "x")])
    assert (metadata.partition, metadata.offset, metadata.timestamp) == (1, 0, 5)
    (request,) = [r for r in proxy.requests if r.url.path.endswith("/records")]
    assert request.url.params["acks"] == "1"
    assert proxy.values("t", 1) == [b"v"]


@pytest.mark.parametrize(
    "options",
    [
        {"acks": 1},  # idempotence needs acks=all
        {"acks": "some"},
        {"idempotent": False, "compression": "zstd"},
        {"batch_max_records": 0},
    ],
)
def test_bad_configs_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidConfigError):
        AsyncProducer(URL, **options)


async def test_send_after_close_is_an_error() -> None:
    proxy = FakeProxy(partitions={"t": 1})
    p = producer(proxy)
    await p.aclose()
    await p.aclose()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        await p.send("t", "x")


class HeldProxy:
    """The fake proxy behind a gate: the first batch request waits for ``release``."""

    def __init__(self, proxy: FakeProxy) -> None:
        self.proxy = proxy
        self.first_in = asyncio.Event()
        self.release = asyncio.Event()
        self.batch_requests = 0

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/batches"):
            self.batch_requests += 1
            if self.batch_requests == 1:
                self.first_in.set()
                await asyncio.wait_for(self.release.wait(), 5)
        return self.proxy.handle(request)

    def producer(self, **options: Any) -> AsyncProducer:
        return AsyncProducer(
            URL, transport=httpx.MockTransport(self.handle), retry_backoff_ms=1, **options
        )


async def test_an_idle_producer_sends_without_lingering() -> None:
    """Adaptive linger: nothing in flight, so the record goes at once, not after 10 s."""
    held = HeldProxy(FakeProxy(partitions={"t": 1}))
    held.release.set()
    async with held.producer(linger_ms=10_000) as p:
        future = await p.send("t", "now")
        await asyncio.wait_for(held.first_in.wait(), 5)  # sent with the linger unspent
        assert (await asyncio.wait_for(future, 5)).offset == 0
    assert held.batch_requests == 1


async def test_records_behind_a_batch_in_flight_leave_together_after_its_answer() -> None:
    held = HeldProxy(FakeProxy(partitions={"t": 2}))
    async with held.producer(linger_ms=10_000) as p:
        first = await p.send("t", "a", partition=0)
        await asyncio.wait_for(held.first_in.wait(), 5)
        behind = [
            await p.send("t", "b", partition=0),
            await p.send("t", "c", partition=0),
            await p.send("t", "d", partition=1),
        ]
        for _ in range(5):  # turns of the event loop: nothing may leave before the answer
            await asyncio.sleep(0)
        assert held.batch_requests == 1
        held.release.set()
        await asyncio.wait_for(asyncio.gather(first, *behind), 5)  # not the 10 s linger
    batches = [(b["records"], b["base_sequence"]) for b in held.proxy.batches]
    assert [len(records) for records, _ in batches] == [1, 2, 1]  # b and c in one batch
    assert held.proxy.values("t", 0) == [b"a", b"b", b"c"]
    assert held.proxy.values("t", 1) == [b"d"]


async def test_a_full_buffer_blocks_send_until_delivery() -> None:
    held = HeldProxy(FakeProxy(partitions={"t": 1}))
    async with held.producer(buffer_max_bytes=100, linger_ms=10_000) as p:
        first = await p.send("t", b"a" * 60)
        await asyncio.wait_for(held.first_in.wait(), 5)  # in flight, held
        blocked = asyncio.create_task(p.send("t", b"b" * 60))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not blocked.done()  # waits for the first record's delivery
        held.release.set()
        await first
        second = await asyncio.wait_for(blocked, 5)
        assert (await second).offset == 1


async def test_buffer_space_returns_when_a_batch_fails() -> None:
    proxy = FakeProxy(partitions={"t": 1})
    proxy.fail("batches", "before", InvalidRequestError("bad record"))
    async with producer(proxy, buffer_max_bytes=100, max_block_ms=50) as p:
        with pytest.raises(InvalidRequestError):
            await p.send_and_wait("t", b"a" * 60)
        assert (await p.send_and_wait("t", b"b" * 60)).offset == 0  # not a KafkaTimeoutError


async def test_buffer_space_returns_when_both_halves_of_a_split_batch_complete() -> None:
    proxy = FakeProxy(partitions={"t": 1}, max_batch_records=3)
    record = 16 + 10  # overhead + value: what each record holds of the buffer
    options = {"buffer_max_bytes": 10 * record, "max_block_ms": 100, "linger_ms": 1_000}
    async with producer(proxy, **options) as p:
        for _round in range(3):  # each round fills the buffer exactly: all of it came back
            futures = [await p.send("t", b"x" * 10) for _ in range(10)]
            await p.flush()
            assert all(f.done() for f in futures)
    assert [w.sequence for w in proxy.logs[("t", 0)]] == list(range(30))


async def test_each_record_gets_its_own_offset_or_its_own_error() -> None:
    held = HeldProxy(FakeProxy(partitions={"t": 2}))
    async with held.producer(linger_ms=10_000) as p:
        first = await p.send("t", "a0", partition=0)  # goes alone, held
        await asyncio.wait_for(held.first_in.wait(), 5)
        zeros = [await p.send("t", f"a{i}", partition=0) for i in range(1, 4)]
        ones = [await p.send("t", f"b{i}", partition=1) for i in range(3)]
        cancelled = await p.send("t", "b3", partition=1)
        cancelled.cancel()  # a caller giving up on one record leaves the others alone
        held.proxy.fail("batches", "before", InvalidRequestError("refused"))
        held.release.set()
        await p.flush()
    assert (await first).offset == 0
    # partition 0's batch or partition 1's went next and was refused; the other was written.
    outcomes = {
        0: [f.exception() or f.result().offset for f in zeros],
        1: [f.exception() or f.result().offset for f in ones],
    }
    refused = 0 if isinstance(outcomes[0][0], InvalidRequestError) else 1
    assert all(isinstance(o, InvalidRequestError) for o in outcomes[refused])
    written = outcomes[1 - refused]
    assert written == ([1, 2, 3] if refused == 1 else [0, 1, 2])
    assert cancelled.cancelled()
