"""Time as an injected dependency.

Everything that reads the clock or sleeps takes a ``Clock`` so that tests of pure logic can use
``FakeClock`` and advance time by hand. Wall time (``time_ms``) stamps records and ages
segments; monotonic time (``monotonic``) measures intervals and timeouts.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol

__all__ = ["Clock", "FakeClock", "SystemClock"]


class Clock(Protocol):
    """A source of wall and monotonic time that can also sleep."""

    def time_ms(self) -> int:
        """Wall-clock time in milliseconds since the Unix epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary fixed point; never goes backwards."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the caller for ``seconds`` of this clock's time."""
        ...


class SystemClock:
    """The real clock."""

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock:
    """A clock that moves only when ``advance`` is called.

    ``sleep`` parks the caller until enough fake time has passed; ``advance`` wakes every
    sleeper whose deadline it reaches, in deadline order.
    """

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = float(start_ms)
        self._mono = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def time_ms(self) -> int:
        return int(self._now_ms)

    def monotonic(self) -> float:
        return self._mono

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._mono + seconds, next(self._seq), future))
        await future

    def advance(self, seconds: float) -> None:
        """Move both clocks forward and wake the sleepers that are due."""
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        self._mono += seconds
        self._now_ms += seconds * 1000.0
        while self._sleepers and self._sleepers[0][0] <= self._mono:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)
