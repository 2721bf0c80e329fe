"""Tests for fetch_waiter and delayed_fetch: woken by appends, not by polling; deadlines hold."""

from __future__ import annotations

import asyncio

from yak.protocol.broker_wire import FetchedPartition, FetchPartition, FetchRequest, PartitionError
from yak.types import TopicPartition
from yak_broker.replication.delayed_fetch import delayed_fetch, is_satisfied
from yak_broker.replication.fetch_waiter import FetchWaiters

A = TopicPartition("t", 0)
B = TopicPartition("t", 1)


class FakePartitions:
    """Partitions whose data the test sets; counts the reads."""

    def __init__(self) -> None:
        self.data: dict[TopicPartition, bytes] = {}
        self.reads = 0

    def read(self, request: FetchRequest) -> list[FetchedPartition]:
        self.reads += 1
        return [
            FetchedPartition(
                p.topic,
                p.partition,
                records=self.data.get(TopicPartition(p.topic, p.partition), b""),
            )
            for p in request.partitions
        ]


def request(min_bytes: int = 1, max_wait_ms: int = 30_000) -> FetchRequest:
    partitions = (FetchPartition("t", 0, 0), FetchPartition("t", 1, 0))
    return FetchRequest(partitions, max_wait_ms=max_wait_ms, min_bytes=min_bytes)


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_answers_at_once_when_data_is_there() -> None:
    parts, waiters = FakePartitions(), FetchWaiters[TopicPartition]()
    parts.data[A] = b"x"
    result = await delayed_fetch(request(), parts.read, waiters)
    assert parts.reads == 1
    assert bytes(result[0].records) == b"x"
    assert waiters.waiting(A) == 0  # unregistered on the way out


async def test_an_append_wakes_the_waiting_fetch() -> None:
    parts, waiters = FakePartitions(), FetchWaiters[TopicPartition]()
    task = asyncio.create_task(delayed_fetch(request(), parts.read, waiters))
    await settle()
    assert (waiters.waiting(A), waiters.waiting(B), parts.reads) == (1, 1, 1)
    assert not task.done()
    parts.data[B] = b"new"
    assert waiters.notify(B) == 1
    result = await asyncio.wait_for(task, 1)  # far below max wait: woken, not timed out
    assert bytes(result[1].records) == b"new"
    assert parts.reads == 2
    assert (waiters.waiting(A), waiters.waiting(B)) == (0, 0)


async def test_waits_again_until_min_bytes() -> None:
    parts, waiters = FakePartitions(), FetchWaiters[TopicPartition]()
    task = asyncio.create_task(delayed_fetch(request(min_bytes=5), parts.read, waiters))
    await settle()
    parts.data[A] = b"ab"
    waiters.notify(A)
    await settle()
    assert not task.done()
    assert parts.reads == 2
    parts.data[B] = b"cde"
    waiters.notify(B)
    result = await asyncio.wait_for(task, 1)
    assert sum(len(p.records) for p in result) == 5


async def test_answers_empty_at_max_wait() -> None:
    parts, waiters = FakePartitions(), FetchWaiters[TopicPartition]()
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await delayed_fetch(request(max_wait_ms=50), parts.read, waiters)
    assert loop.time() - started >= 0.045
    assert all(len(p.records) == 0 for p in result)
    assert parts.reads == 2  # once at the start, once at the deadline: no polling between


async def test_max_wait_is_capped() -> None:
    parts, waiters = FakePartitions(), FetchWaiters[TopicPartition]()
    result = await delayed_fetch(
        request(max_wait_ms=3_600_000), parts.read, waiters, max_wait_limit_ms=20
    )
    assert len(result) == 2


async def test_zero_max_wait_or_zero_min_bytes_answer_at_once() -> None:
    parts, waiters = FakePartitions(), FetchWaiters[TopicPartition]()
    await delayed_fetch(request(max_wait_ms=0), parts.read, waiters)
    await delayed_fetch(request(min_bytes=0), parts.read, waiters)
    assert parts.reads == 2


def test_an_error_satisfies_a_fetch() -> None:
    failed = FetchedPartition("t", 0, error=PartitionError("NOT_LEADER_OR_FOLLOWER", "moved"))
    assert is_satisfied([failed], min_bytes=10**6)
    assert not is_satisfied([FetchedPartition("t", 0)], min_bytes=1)


async def test_notify_all_wakes_everyone_and_notify_without_waiters_is_free() -> None:
    parts, waiters = FakePartitions(), FetchWaiters[TopicPartition]()
    assert waiters.notify(A) == 0
    tasks = [asyncio.create_task(delayed_fetch(request(), parts.read, waiters)) for _ in range(3)]
    await settle()
    assert waiters.waiting(A) == 3
    parts.data[A] = b"x"
    waiters.notify_all()
    results = await asyncio.wait_for(asyncio.gather(*tasks), 1)
    assert len(results) == 3
