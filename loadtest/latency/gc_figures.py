"""The collector's pauses per service over one measurement: how many collections, how many a
minute, their p50/p99, and how many of each generation (issue 34).

The input is the budget's diffed histograms (``loadtest.latency.histograms``): every
service's ``yak_gc_pause_seconds`` buckets, read per generation (``gc_key``) and summed over
the processes of a service (the three brokers together). A window without a collection
reports 0 collections and p50/p99 of 0 ms: no request waited on the collector.

Pure: the histograms and the window's length come from ``loadtest.latency.budget``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loadtest.latency.histograms import StageKey, gc_key, histogram_quantile
from loadtest.latency.rows import rounded

__all__ = ["GC_SERVICES", "GcFigure", "gc_figures"]

#: The services whose pauses are reported, in the order shown; the brokers summed.
GC_SERVICES = ("rest-proxy", "broker", "coordinator")
_GENERATIONS = (0, 1, 2)


@dataclass(frozen=True)
class GcFigure:
    """One service's collections over a window of ``seconds``."""

    service: str
    collections: int
    per_min: float
    p50_ms: float
    p99_ms: float
    #: Collections of generation 0, 1 and 2.
    by_generation: tuple[int, int, int]
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "collections": self.collections,
            "per_min": rounded(self.per_min, 1),
            "p50_ms": rounded(self.p50_ms, 3),
            "p99_ms": rounded(self.p99_ms, 3),
            "by_generation": list(self.by_generation),
            "seconds": rounded(self.seconds, 1),
        }


def _count(buckets: Mapping[float, float]) -> int:
    return round(max(buckets.values(), default=0.0))


def gc_figures(
    window: Mapping[StageKey, Mapping[float, float]],
    seconds: float,
    services: Sequence[str] = GC_SERVICES,
) -> list[GcFigure]:
    """Each service of ``services`` whose pauses ``window`` holds (a build that does not export
    them is left out), over a window of ``seconds`` (> 0)."""
    if seconds <= 0:
        raise ValueError(f"a window lasts more than 0 s, not {seconds}")
    out = []
    for service in services:
        generations = [window.get(gc_key(service, g)) for g in _GENERATIONS]
        if all(buckets is None for buckets in generations):
            continue
        summed: dict[float, float] = {}
        for buckets in generations:
            for bound, count in (buckets or {}).items():
                summed[bound] = summed.get(bound, 0.0) + count
        counts = tuple(_count(buckets or {}) for buckets in generations)
        collections = sum(counts)
        p50, p99 = (histogram_quantile(q, summed) if collections else 0.0 for q in (0.5, 0.99))
        out.append(
            GcFigure(
                service,
                collections,
                per_min=collections * 60 / seconds,
                p50_ms=(p50 or 0.0) * 1000,
                p99_ms=(p99 or 0.0) * 1000,
                by_generation=(counts[0], counts[1], counts[2]),
                seconds=seconds,
            )
        )
    return out
