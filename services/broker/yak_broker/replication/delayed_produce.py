"""acks=all (Kafka's ``DelayedProduce``): a produce waits until the high watermark covers it.

The leader appends, then ``wait(tp, end_offset, timeout)`` parks the request on a future keyed by
the offset it needs. ``advance(tp, high_watermark)`` — called whenever a partition's high
watermark moves — completes every waiter at or below it, in offset order. ``fail(tp, error)``
completes them with an error when the broker stops leading the partition (the batches may still
be committed by the new leader, or truncated: the producer retries, idempotence dedupes).
A timeout raises ``REQUEST_TIMED_OUT``: the batch is in the leader's log and may yet commit —
documented, as in Kafka. No polling: the futures are woken by the events.

Single event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Hashable
from typing import Generic, TypeVar

from yak.errors import KafkaTimeoutError, YakError

__all__ = ["HighWatermarkWaiters"]

K = TypeVar("K", bound=Hashable)

_Entry = tuple[int, int, "asyncio.Future[None]"]


class HighWatermarkWaiters(Generic[K]):
    """Futures waiting for a partition's high watermark to reach an offset."""

    def __init__(self) -> None:
        self._waiting: dict[K, list[_Entry]] = {}
        self._sequence = itertools.count()

    def pending(self, key: K) -> int:
        return len(self._waiting.get(key, ()))

    async def wait(self, key: K, offset: int, timeout_s: float, what: str) -> None:
        """Return once ``advance(key, hw)`` with ``hw >= offset``; raise on timeout or ``fail``."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting.setdefault(key, []), (offset, next(self._sequence), future))
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except TimeoutError:
            raise KafkaTimeoutError(
                f"{what}: appended by the leader but not replicated to the ISR within "
                f"{timeout_s:.3f} s; it may still be committed"
            ) from None
        finally:
            if not future.done():
                future.cancel()  # dropped from the heap lazily by ``advance``/``fail``

    def advance(self, key: K, high_watermark: int) -> None:
        """Complete the waiters of ``key`` whose offset is at or below ``high_watermark``."""
        heap = self._waiting.get(key)
        while heap and heap[0][0] <= high_watermark:
            _, _, future = heapq.heappop(heap)
            if not future.done():
                future.set_result(None)
        if heap is not None and not heap:
            del self._waiting[key]

    def fail(self, key: K, error: YakError) -> None:
        """Complete every waiter of ``key`` with ``error`` (leadership lost, partition gone)."""
        for _, _, future in self._waiting.pop(key, []):
            if not future.done():
                future.set_exception(error)

    def fail_all(self, error: YakError) -> None:
        for key in list(self._waiting):
            self.fail(key, error)
