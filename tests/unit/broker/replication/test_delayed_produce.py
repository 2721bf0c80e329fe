"""acks=all waiters: woken by high-watermark moves in offset order, failed on leadership loss."""

from __future__ import annotations

import asyncio

import pytest

from yak.errors import KafkaTimeoutError, NotLeaderOrFollowerError
from yak_broker.replication.delayed_produce import HighWatermarkWaiters


async def test_advance_completes_waiters_at_or_below_the_high_watermark() -> None:
    waiters: HighWatermarkWaiters[str] = HighWatermarkWaiters()
    done: list[int] = []

    async def produce(offset: int) -> None:
        await waiters.wait("t-0", offset, 5, f"t-0@{offset}")
        done.append(offset)

    tasks = [asyncio.create_task(produce(o)) for o in (30, 10, 20)]
    await asyncio.sleep(0)
    assert waiters.pending("t-0") == 3
    waiters.advance("t-0", 9)
    await asyncio.sleep(0)
    assert done == []
    waiters.advance("t-0", 20)
    await asyncio.wait_for(asyncio.gather(tasks[1], tasks[2]), 5)
    assert done == [10, 20]
    waiters.advance("other", 100)  # another partition wakes nobody here
    await asyncio.sleep(0.01)
    assert done == [10, 20]
    assert not tasks[0].done()
    waiters.advance("t-0", 30)
    await asyncio.gather(*tasks)
    assert done == [10, 20, 30]
    assert waiters.pending("t-0") == 0


async def test_timeout_raises_request_timed_out_and_later_advance_is_harmless() -> None:
    waiters: HighWatermarkWaiters[str] = HighWatermarkWaiters()
    with pytest.raises(KafkaTimeoutError, match="may still be committed"):
        await waiters.wait("t-0", 5, 0.01, "t-0")
    waiters.advance("t-0", 10)  # the cancelled future is skipped
    assert waiters.pending("t-0") == 0


async def test_fail_completes_every_waiter_of_the_partition_with_the_error() -> None:
    waiters: HighWatermarkWaiters[str] = HighWatermarkWaiters()
    a = asyncio.create_task(waiters.wait("t-0", 5, 5, "a"))
    b = asyncio.create_task(waiters.wait("t-1", 5, 5, "b"))
    await asyncio.sleep(0)
    waiters.fail("t-0", NotLeaderOrFollowerError("moved"))
    with pytest.raises(NotLeaderOrFollowerError):
        await a
    assert not b.done()
    waiters.fail_all(NotLeaderOrFollowerError("stopping"))
    with pytest.raises(NotLeaderOrFollowerError):
        await b
