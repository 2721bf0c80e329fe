"""``ServiceMetrics.render``: the hooks on the event loop, the text rendered off it — a slow
collector (a broker walking 20,000 replicas) must not hold the loop for its whole collection."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from yak.observability.metrics import ServiceMetrics


class _Slow(Collector):
    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        self.threads.append(threading.current_thread())
        deadline = time.perf_counter() + 0.3
        while time.perf_counter() < deadline:  # CPU-bound, like a walk over the replicas
            pass
        yield GaugeMetricFamily("yak_test_slow", "A slow gauge.", value=1)


async def test_a_slow_collector_runs_off_the_loop_which_keeps_serving() -> None:
    metrics = ServiceMetrics("test")
    slow = _Slow()
    metrics.registry.register(slow)
    hooked: list[threading.Thread] = []

    async def hook() -> None:
        hooked.append(threading.current_thread())

    metrics.before_scrape.append(hook)
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            await asyncio.sleep(0.01)
            ticks += 1

    running = asyncio.create_task(ticker())
    try:
        text = await metrics.render()
    finally:
        stop.set()
        await running
    assert b"yak_test_slow 1.0" in text
    assert hooked == [threading.current_thread()]  # hooks: on the loop
    assert len(slow.threads) == 1
    assert slow.threads[0] is not threading.current_thread()  # the collection: off it
    assert ticks >= 3  # the loop ran its timers during the 0.3 s collection (on it: 1 at most)
