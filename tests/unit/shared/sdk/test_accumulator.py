"""``BatchQueue``: when a batch is full, when it may go, and how a too-large one splits.

Async only for a running loop to make the records' futures on."""

from __future__ import annotations

import asyncio

import pytest

from yak.record import RecordInput
from yak.sdk.accumulator import RECORD_OVERHEAD, BatchQueue, ProducerBatch, record_size
from yak.sdk.idempotence import BatchStamp
from yak.sdk.records import RecordMetadata


class Clock:
    def __init__(self, now_ms: float = 0.0) -> None:
        self.now_ms = now_ms

    def __call__(self) -> float:
        return self.now_ms


def future() -> asyncio.Future[RecordMetadata]:
    return asyncio.get_running_loop().create_future()


def values(batch: ProducerBatch) -> list[bytes | None]:
    return [r.value for r in batch.records]


def add(queue: BatchQueue, value: bytes, size: int) -> bool:
    return queue.append(RecordInput(None, value, (), 0), future(), size)


async def test_records_fill_a_batch_then_start_the_next() -> None:
    clock = Clock()
    queue = BatchQueue(max_records=3, max_bytes=1_000, clock=clock)
    started = []
    for i, item in enumerate(b"abcdefg"):
        clock.now_ms = float(i)
        started.append(add(queue, bytes([item]), 10))
    # True: a new batch (a, d, g) or a batch now full (c, f) — the sender should look again.
    assert started == [True, False, True, True, False, True, True]
    assert queue.batches == 3
    assert len(queue) == 7
    first = queue.pop()
    assert (values(first), first.size, first.created_ms) == ([b"a", b"b", b"c"], 30, 0.0)
    assert len(first.futures) == 3
    assert values(queue.pop()) == [b"d", b"e", b"f"]
    assert values(queue.pop()) == [b"g"]


async def test_bytes_bound_a_batch_and_a_huge_record_goes_alone() -> None:
    queue = BatchQueue(max_records=100, max_bytes=100, clock=Clock())
    add(queue, b"a", 60)
    add(queue, b"b", 50)  # 110 > 100: a new batch
    add(queue, b"huge", 500)  # larger than any batch: one of its own
    add(queue, b"c", 1)
    assert [values(b) for b in queue] == [[b"a"], [b"b"], [b"huge"], [b"c"]]


@pytest.mark.parametrize(
    ("appended", "flushing", "expected"),
    [
        ([], False, None),  # nothing waits
        ([10], False, 1_005.0),  # an open batch lingers from its first record
        ([10], True, 1_000.0),  # a flush sends it now
        ([10, 10, 10], False, 1_000.0),  # full (3 records): now
        ([10, 10, 10, 10], False, 1_000.0),  # another waits behind: now
        ([120], False, 1_000.0),  # full by bytes
    ],
)
async def test_ready_at(appended: list[int], flushing: bool, expected: float | None) -> None:
    queue = BatchQueue(max_records=3, max_bytes=100, clock=Clock(1_000.0))
    for size in appended:
        add(queue, b"x", size)
    assert queue.ready_at(linger_ms=5, flushing=flushing) == expected


async def test_an_idle_producer_does_not_linger() -> None:
    queue = BatchQueue(max_records=3, max_bytes=100, clock=Clock(1_000.0))
    assert queue.ready_at(linger_ms=5, idle=True) is None
    add(queue, b"x", 10)
    assert queue.ready_at(linger_ms=5, idle=True) == 1_000.0  # nothing in flight: now
    assert queue.ready_at(linger_ms=5, idle=False) == 1_005.0


async def test_split_halves_go_back_first_unstamped_with_their_share_of_bytes() -> None:
    queue = BatchQueue(max_records=4, max_bytes=1_000, clock=Clock(7))
    for n, item in enumerate(b"abcde", start=1):
        value = bytes([item]) * n
        add(queue, value, record_size(None, value, ()))
    batch = queue.pop()
    batch.stamp = BatchStamp(1, 0, 40)
    first, second = batch.split()
    assert (values(first), first.size) == ([b"a", b"bb"], 2 * RECORD_OVERHEAD + 3)
    assert (values(second), second.created_ms) == ([b"ccc", b"dddd"], 7)
    assert first.size + second.size == batch.size
    assert first.futures == batch.futures[:2]
    assert second.futures == batch.futures[2:]
    assert first.stamp is None
    assert second.stamp is None
    queue.push_front([first, second])
    assert [values(queue.pop()) for _ in range(3)] == [
        [b"a", b"bb"],
        [b"ccc", b"dddd"],
        [b"eeeee"],
    ]


async def test_a_single_record_does_not_split() -> None:
    with pytest.raises(ValueError, match="one record"):
        ProducerBatch([RecordInput(None, b"x", (), 0)], [future()], 1, 0).split()


async def test_record_size_counts_key_value_and_headers() -> None:
    assert record_size(None, None, ()) == RECORD_OVERHEAD
    assert record_size(b"k", b"vv", (("h", b"xyz"), ("i", None))) == RECORD_OVERHEAD + 3 + 6 + 3


async def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least one"):
        BatchQueue(max_records=0, max_bytes=10, clock=Clock())
