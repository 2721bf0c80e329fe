"""The long poll of a fetch (Kafka's ``DelayedFetch``): answer at ``min_bytes`` or ``max_wait``.

``delayed_fetch`` reads the partitions once; if they hold at least ``min_bytes`` (or a partition
failed, or ``max_wait_ms`` is 0) it answers at once. Otherwise it waits on a ``FetchWaiter``
registered under every named partition — woken by ``FetchWaiters.notify`` when an append makes
data visible — and reads again, until enough data is there or the deadline passes; then it
answers with whatever it has (possibly nothing). There is no polling: between wake-ups the
fetch costs nothing.

The read function is injected, so the waiting logic is tested with fake partitions. With
``stages`` (``metrics.FetchStages``), each answered fetch observes once the time it spent
parked (``wait``, 0 when the first read answered) and reading the logs (``read``, summed over
its wake-ups).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from yak.protocol.broker_wire import FetchedPartition, FetchRequest
from yak.types import TopicPartition
from yak_broker.metrics import FetchStages
from yak_broker.replication.fetch_waiter import FetchWaiters

__all__ = ["delayed_fetch", "is_satisfied"]

ReadFn = Callable[[FetchRequest], Sequence[FetchedPartition]]


def is_satisfied(partitions: Sequence[FetchedPartition], min_bytes: int) -> bool:
    """Whether a fetch may answer now: enough bytes, or an error to report."""
    total = 0
    for partition in partitions:
        if partition.error is not None:
            return True
        total += len(memoryview(partition.records))
    return total >= min_bytes


async def delayed_fetch(
    request: FetchRequest,
    read: ReadFn,
    waiters: FetchWaiters[TopicPartition],
    *,
    max_wait_limit_ms: int = 30_000,
    stages: FetchStages | None = None,
) -> Sequence[FetchedPartition]:
    """Read ``request``'s partitions, waiting up to its max wait for ``min_bytes``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(request.max_wait_ms, max_wait_limit_ms) / 1000
    keys = [TopicPartition(p.topic, p.partition) for p in request.partitions]
    read_s = wait_s = 0.0
    with waiters.watching(keys) as waiter:
        while True:
            waiter.arm()  # before the read: an append after it finds the armed future
            started = time.perf_counter()
            result = read(request)
            read_s += time.perf_counter() - started
            if is_satisfied(result, request.min_bytes):
                break
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            parked = time.perf_counter()
            await waiter.wait(remaining)
            wait_s += time.perf_counter() - parked
    if stages is not None:
        stages.wait.observe(wait_s)
        stages.read.observe(read_s)
    return result
