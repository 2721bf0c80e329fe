"""What the Python runtime costs a service: garbage-collector pauses and event-loop lag.

Both show where a latency tail comes from when no stage of the budget explains it: a request
that waited 20 ms while the collector walked the heap, or while another callback held the event
loop, spent that time in no stage at all.

- ``yak_gc_pause_seconds`` (histogram; service, generation): every collection's duration, from
  ``gc.callbacks``. The collector is one per process, so the timing is too: one callback is
  installed the first time any service asks (``GcPauses.shared()``) and stays; each service's
  registry exports the same process-wide figures.
- ``yak_event_loop_lag_seconds`` (histogram; service): how late a timer fires. A
  ``LoopLagMonitor`` schedules a callback every ``interval_s`` and observes how much later than
  asked it ran — the time the loop was held by other work (a timer by nature: lag is measured
  in time). Started and stopped with the service (``async with monitor.running()``).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import gc
import threading
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

__all__ = ["GC_BUCKETS", "LAG_BUCKETS", "GcPauses", "LoopLagMonitor"]

#: From 100 µs (a young collection of a few thousand objects) to 1 s (a full one of a big heap),
#: with bounds at 1.5 and 2 ms: the rest-proxy's goal is a p99 ≤ 2 ms (issue 34), and a bucket
#: from 1 to 2.5 ms interpolated every p99 that fell in it to ~2.4 ms, whatever the pauses were.
GC_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0015,
    0.002,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    1.0,
)
#: Event-loop lag: 1 ms (a busy loop) to 5 s (a loop stalled long enough to lose a lease).
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_GENERATIONS = 3


class GcPauses(Collector):
    """Process-wide collection pauses, per generation, as cumulative bucket counts."""

    _shared: GcPauses | None = None
    _lock = threading.Lock()

    def __init__(self, buckets: Sequence[float] = GC_BUCKETS) -> None:
        self.buckets = tuple(buckets)
        # Per generation: a count per bucket (the last is +Inf), and the sum of seconds.
        self._counts = [[0] * (len(self.buckets) + 1) for _ in range(_GENERATIONS)]
        self._sums = [0.0] * _GENERATIONS
        self._started = 0.0
        self.services: list[str] = []

    @classmethod
    def shared(cls) -> GcPauses:
        """The process's one instance, its callback installed on first use."""
        with cls._lock:
            if cls._shared is None:
                cls._shared = cls()
                gc.callbacks.append(cls._shared._callback)
            return cls._shared

    def register(self, registry: CollectorRegistry, service: str) -> None:
        """Export the pauses on ``registry``, labelled ``service``."""
        registry.register(_Labelled(self, service))

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        self.observe(int(info["generation"]), time.perf_counter() - self._started)

    def observe(self, generation: int, seconds: float) -> None:
        """Count one collection of ``generation`` that took ``seconds``."""
        generation = min(max(generation, 0), _GENERATIONS - 1)
        self._counts[generation][bisect.bisect_left(self.buckets, seconds)] += 1
        self._sums[generation] += seconds

    def collect(self) -> Iterable[HistogramMetricFamily]:
        return self.families("")

    def families(self, service: str) -> Iterable[HistogramMetricFamily]:
        family = HistogramMetricFamily(
            "yak_gc_pause_seconds",
            "Duration of each garbage collection of the process, by generation.",
            labels=["service", "generation"],
        )
        for generation in range(_GENERATIONS):
            cumulative: list[tuple[str, float]] = []
            running = 0
            bounds = (*self.buckets, float("inf"))
            for bound, count in zip(bounds, self._counts[generation], strict=True):
                running += count
                cumulative.append((_bound(bound), running))
            family.add_metric([service, str(generation)], cumulative, self._sums[generation])
        yield family


class _Labelled(Collector):
    def __init__(self, pauses: GcPauses, service: str) -> None:
        self._pauses = pauses
        self._service = service

    def collect(self) -> Iterable[HistogramMetricFamily]:
        return self._pauses.families(self._service)


def _bound(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


class LoopLagMonitor:
    """Observes how late the event loop runs a timer (see the module docstring)."""

    def __init__(
        self, registry: CollectorRegistry, service: str, *, interval_s: float = 0.1
    ) -> None:
        self.interval_s = interval_s
        self._histogram = Histogram(
            "yak_event_loop_lag_seconds",
            "How much later than scheduled the event loop ran a periodic timer: the time it "
            "was held by other work.",
            ["service"],
            buckets=LAG_BUCKETS,
            registry=registry,
        )
        self._lag = self._histogram.labels(service)
        #: The largest lag seen since start, in seconds.
        self.worst_s = 0.0

    def observe(self, lag_s: float) -> None:
        self._lag.observe(lag_s)
        self.worst_s = max(self.worst_s, lag_s)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[LoopLagMonitor]:
        """Measure while the block runs."""
        loop = asyncio.get_running_loop()
        clock = time.perf_counter  # not loop.time(): uvloop's is cached per iteration, in ms
        handle: asyncio.TimerHandle | None = None

        def tick(due: float) -> None:
            nonlocal handle
            now = clock()
            self.observe(max(0.0, now - due))
            handle = loop.call_later(self.interval_s, tick, now + self.interval_s)

        handle = loop.call_later(self.interval_s, tick, clock() + self.interval_s)
        try:
            yield self
        finally:
            handle.cancel()
