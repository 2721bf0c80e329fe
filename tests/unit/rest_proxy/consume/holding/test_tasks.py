"""``BackgroundTasks``: ``drain`` lets running work finish within its timeout, then cancels
what is left."""

from __future__ import annotations

import asyncio

from yak_rest_proxy.consume.holding.tasks import BackgroundTasks


async def test_drain_waits_for_work_that_finishes_and_cancels_work_that_does_not() -> None:
    tasks = BackgroundTasks()
    done, stuck = asyncio.Event(), asyncio.Event()
    cancelled: list[str] = []

    async def quick() -> None:
        done.set()

    async def forever() -> None:
        try:
            await stuck.wait()
        except asyncio.CancelledError:
            cancelled.append("forever")
            raise

    tasks.spawn(quick())
    tasks.spawn(forever())
    await tasks.drain(0.01)
    assert done.is_set()
    assert cancelled == ["forever"]
