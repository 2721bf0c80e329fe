"""GC pauses and event-loop lag (``yak.observability.runtime``), as Prometheus exports them."""

from __future__ import annotations

import asyncio
import gc
import time

from prometheus_client import CollectorRegistry, generate_latest

from yak.observability.metrics import ServiceMetrics
from yak.observability.runtime import GcPauses, LoopLagMonitor


def _sample(registry: CollectorRegistry, name: str, labels: dict[str, str]) -> float:
    value = registry.get_sample_value(name, labels)
    assert value is not None, f"{name} {labels} is not exported"
    return value


def test_pauses_fall_in_their_bucket_per_generation() -> None:
    pauses = GcPauses(buckets=(0.001, 0.01))
    registry = CollectorRegistry()
    pauses.register(registry, "broker")
    pauses.observe(0, 0.0005)
    pauses.observe(2, 0.005)
    pauses.observe(2, 0.5)

    young = {"service": "broker", "generation": "0"}
    old = {"service": "broker", "generation": "2"}
    assert _sample(registry, "yak_gc_pause_seconds_bucket", {**young, "le": "0.001"}) == 1
    assert _sample(registry, "yak_gc_pause_seconds_count", young) == 1
    assert _sample(registry, "yak_gc_pause_seconds_bucket", {**old, "le": "0.001"}) == 0
    assert _sample(registry, "yak_gc_pause_seconds_bucket", {**old, "le": "0.01"}) == 1
    assert _sample(registry, "yak_gc_pause_seconds_bucket", {**old, "le": "+Inf"}) == 2
    assert _sample(registry, "yak_gc_pause_seconds_sum", old) == 0.505


def test_a_real_collection_is_counted_by_every_service_registry() -> None:
    first, second = ServiceMetrics("broker"), ServiceMetrics("rest-proxy")
    labels = {"generation": "2"}
    before = _sample(first.registry, "yak_gc_pause_seconds_count", {"service": "broker", **labels})
    gc.collect()
    after = _sample(first.registry, "yak_gc_pause_seconds_count", {"service": "broker", **labels})
    assert after == before + 1
    other = {"service": "rest-proxy", **labels}
    assert _sample(second.registry, "yak_gc_pause_seconds_count", other) == after
    assert b"yak_gc_pause_seconds_bucket" in generate_latest(first.registry)


def _hold_the_loop(seconds: float) -> None:
    """A long synchronous callback: nothing else runs on the loop meanwhile."""
    time.sleep(seconds)


async def test_a_blocked_loop_shows_as_lag_and_the_timer_stops_with_the_block() -> None:
    registry = CollectorRegistry()
    monitor = LoopLagMonitor(registry, "broker", interval_s=0.01)
    async with monitor.running():
        await asyncio.sleep(0.03)
        _hold_the_loop(0.06)
        await asyncio.sleep(0.03)
    ticks = _sample(registry, "yak_event_loop_lag_seconds_count", {"service": "broker"})
    assert ticks >= 3
    assert monitor.worst_s >= 0.04
    late = _sample(
        registry, "yak_event_loop_lag_seconds_bucket", {"service": "broker", "le": "0.025"}
    )
    assert late < ticks  # the blocked tick landed above 25 ms
    await asyncio.sleep(0.05)
    assert _sample(registry, "yak_event_loop_lag_seconds_count", {"service": "broker"}) == ticks
