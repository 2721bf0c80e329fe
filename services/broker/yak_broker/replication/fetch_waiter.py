"""Wake-ups for long-polling fetches: one future per waiting fetch, no polling loop.

A fetch that found too little data registers a ``FetchWaiter`` under every partition it names
(``FetchWaiters.watching``) and awaits it. When data becomes visible in a partition — an append
moved its high watermark, or the partition was deleted or changed leader — the owner calls
``notify(tp)``, which resolves the future of every fetch waiting on ``tp``; they re-read and
either answer or wait again until their deadline (``delayed_fetch``).

Lost-wake-up freedom: a fetch ``arm``-s its waiter *before* reading the logs and awaits it
after; reads are synchronous on the event loop, so any append after the read finds the armed
future. Cost of ``notify``: one dict lookup when nobody waits.

Single event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

__all__ = ["FetchWaiter", "FetchWaiters"]

_K = TypeVar("_K")


class FetchWaiter:
    """The wake-up of one waiting fetch."""

    __slots__ = ("_future", "wakeups")

    def __init__(self) -> None:
        self._future: asyncio.Future[None] | None = None
        self.wakeups = 0  # how many times a notify woke it (tests, metrics)

    def arm(self) -> None:
        """Prepare for the next wait (call before reading the logs)."""
        if self._future is None or self._future.done():
            self._future = asyncio.get_running_loop().create_future()

    def wake(self) -> None:
        future = self._future
        if future is not None and not future.done():
            self.wakeups += 1
            future.set_result(None)

    async def wait(self, timeout_s: float) -> bool:
        """Wait for ``wake`` (True) or ``timeout_s`` (False). ``arm`` must come first."""
        if self._future is None:
            raise RuntimeError("FetchWaiter.wait called before arm")
        try:
            async with asyncio.timeout(timeout_s):
                await self._future
        except TimeoutError:
            return False
        return True


class FetchWaiters(Generic[_K]):
    """The fetches waiting on each partition (keyed by ``_K``, e.g. ``TopicPartition``)."""

    def __init__(self) -> None:
        self._waiting: dict[_K, set[FetchWaiter]] = {}

    @contextmanager
    def watching(self, keys: Iterable[_K]) -> Iterator[FetchWaiter]:
        """A waiter registered under ``keys`` for the duration of the block."""
        waiter = FetchWaiter()
        keys = tuple(keys)
        for key in keys:
            self._waiting.setdefault(key, set()).add(waiter)
        try:
            yield waiter
        finally:
            for key in keys:
                waiters = self._waiting.get(key)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        del self._waiting[key]

    def notify(self, key: _K) -> int:
        """Wake every fetch waiting on ``key``; return how many there were."""
        waiters = self._waiting.get(key)
        if not waiters:
            return 0
        for waiter in waiters:
            waiter.wake()
        return len(waiters)

    def notify_all(self) -> None:
        """Wake every waiting fetch (e.g. at shutdown, so long polls answer at once)."""
        for waiters in self._waiting.values():
            for waiter in waiters:
                waiter.wake()

    def waiting(self, key: _K) -> int:
        return len(self._waiting.get(key, ()))
