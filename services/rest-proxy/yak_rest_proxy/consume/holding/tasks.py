"""``BackgroundTasks``: the work a holder starts off the request path (hand-overs, lease
refreshes, watches stopping), kept so that ``stop`` can wait for it, then cancel what is left.

A task removes itself from the set when it ends; an exception it raises is left to the
task (each coroutine started here logs its own failures). Single event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

__all__ = ["BackgroundTasks"]


class BackgroundTasks:
    """Coroutines started in the background and not yet done."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the running tasks (and those they start meanwhile are
        not waited for), then cancel every task left."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout_s)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
