"""``BatchQueue``: when a batch is full, when it may go, and how a too-large one splits."""

from __future__ import annotations

import pytest

from yak.sdk.accumulator import BatchQueue, ProducerBatch
from yak.sdk.idempotence import BatchStamp


def test_records_fill_a_batch_then_start_the_next() -> None:
    queue: BatchQueue[str] = BatchQueue(max_records=3, max_bytes=1_000)
    for i, item in enumerate("abcdefg"):
        queue.append(item, 10, now_ms=float(i))
    assert queue.batches == 3
    assert len(queue) == 7
    first = queue.pop()
    assert (first.items, first.size, first.created_ms) == (["a", "b", "c"], 30, 0.0)
    assert queue.pop().items == ["d", "e", "f"]
    assert queue.pop().items == ["g"]


def test_bytes_bound_a_batch_and_a_huge_record_goes_alone() -> None:
    queue: BatchQueue[str] = BatchQueue(max_records=100, max_bytes=100)
    queue.append("a", 60, 0)
    queue.append("b", 50, 0)  # 110 > 100: a new batch
    queue.append("huge", 500, 0)  # larger than any batch: one of its own
    queue.append("c", 1, 0)
    assert [queue.pop().items for _ in range(queue.batches)] == [["a"], ["b"], ["huge"], ["c"]]


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
def test_ready_at(appended: list[int], flushing: bool, expected: float | None) -> None:
    queue: BatchQueue[int] = BatchQueue(max_records=3, max_bytes=100)
    for size in appended:
        queue.append(size, size, now_ms=1_000.0)
    assert queue.ready_at(linger_ms=5, flushing=flushing) == expected


def test_an_idle_producer_does_not_linger() -> None:
    queue: BatchQueue[int] = BatchQueue(max_records=3, max_bytes=100)
    assert queue.ready_at(linger_ms=5, idle=True) is None
    queue.append(10, 10, now_ms=1_000.0)
    assert queue.ready_at(linger_ms=5, idle=True) == 1_000.0  # nothing in flight: now
    assert queue.ready_at(linger_ms=5, idle=False) == 1_005.0


def test_split_halves_go_back_first_unstamped() -> None:
    queue: BatchQueue[str] = BatchQueue(max_records=4, max_bytes=1_000)
    for item in "abcde":
        queue.append(item, 1 + ord(item) - ord("a"), now_ms=7)
    batch = queue.pop()
    batch.stamp = BatchStamp(1, 0, 40)
    first, second = batch.split()
    assert (first.items, first.size, first.sizes) == (["a", "b"], 3, [1, 2])
    assert (second.items, second.size, second.created_ms) == (["c", "d"], 7, 7)
    assert first.stamp is None
    assert second.stamp is None
    queue.push_front([first, second])
    assert [queue.pop().items for _ in range(3)] == [["a", "b"], ["c", "d"], ["e"]]


def test_a_single_record_does_not_split() -> None:
    with pytest.raises(ValueError, match="one record"):
        ProducerBatch(["x"], 1, 0, sizes=[1]).split()


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least one"):
        BatchQueue[str](max_records=0, max_bytes=10)
