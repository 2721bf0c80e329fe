"""The soak test's arithmetic, kept pure so it is unit-tested: durations, percentiles,
least-squares slopes (per hour, per process incarnation) and delivery accounting.

A process restarted during the soak (a broker) is a new *incarnation* (a new pid): its memory
starts again from zero, so one line fitted through all its samples would show the restarts,
not a leak. ``process_slopes`` fits each incarnation on its own and reports their mean
weighted by how long each was observed.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ACKED",
    "FAILED",
    "PENDING",
    "Delivery",
    "ProcessSample",
    "Window",
    "account_delivery",
    "linear_slope",
    "parse_duration",
    "per_hour",
    "percentile",
    "process_slopes",
]

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in ``"90"``, ``"20s"``, ``"5m"``, ``"1.5h"`` or ``"1h30m"``."""
    parts = re.findall(r"(\d+(?:\.\d+)?)([smh]?)", text.strip().lower())
    if not parts or "".join(n + u for n, u in parts) != text.strip().lower():
        raise ValueError(f"not a duration: {text!r} (use e.g. 90, 20s, 5m, 1h30m)")
    return sum(float(number) * _UNITS[unit] for number, unit in parts)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) by the nearest-rank method; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def linear_slope(xs: Sequence[float], ys: Sequence[float | None]) -> float | None:
    """The least-squares slope of ``ys`` over ``xs`` (None ys skipped: a window without
    data); None with fewer than 2 distinct xs."""
    points = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """One look at one process: seconds since the soak started, resident MB, open fds, and the
    resident MB split into anonymous and file-backed (``RssAnon``, ``RssFile``; None when
    unknown)."""

    name: str
    pid: int
    t_s: float
    rss_mb: float
    fds: int
    anon_mb: float | None = None
    file_mb: float | None = None


def per_hour(xs: Sequence[float], ys: Sequence[float | None]) -> float | None:
    """``linear_slope`` with ``xs`` in seconds, per hour."""
    slope = linear_slope(xs, ys)
    return None if slope is None else slope * 3600.0


def process_slopes(
    samples: Iterable[ProcessSample], min_samples: int = 3
) -> dict[str, dict[str, object]]:
    """Per process name: RSS MB/hour and fds/hour, each incarnation fitted on its own and
    averaged weighted by its observed span; incarnations with fewer than ``min_samples``
    samples are listed but not fitted."""
    by_name: dict[str, dict[int, list[ProcessSample]]] = {}
    for sample in samples:
        by_name.setdefault(sample.name, {}).setdefault(sample.pid, []).append(sample)
    out: dict[str, dict[str, object]] = {}
    for name, incarnations in by_name.items():
        fitted: list[tuple[float, float, float]] = []  # span, rss slope, fd slope
        anon_fitted: list[tuple[float, float]] = []  # span, anonymous MB slope
        listed = []
        for pid, points in incarnations.items():
            points.sort(key=lambda s: s.t_s)
            ts = [p.t_s for p in points]
            rss = per_hour(ts, [p.rss_mb for p in points])
            fds = per_hour(ts, [float(p.fds) for p in points])
            anon = per_hour(ts, [p.anon_mb for p in points])
            span = ts[-1] - ts[0]
            listed.append(
                {
                    "pid": pid,
                    "samples": len(points),
                    "span_s": round(span, 1),
                    "rss_mb_first": round(points[0].rss_mb, 1),
                    "rss_mb_last": round(points[-1].rss_mb, 1),
                    "fds_last": points[-1].fds,
                    "rss_mb_per_hour": None if rss is None else round(rss, 2),
                    "fds_per_hour": None if fds is None else round(fds, 2),
                    "anon_mb_per_hour": None if anon is None else round(anon, 2),
                }
            )
            if len(points) >= min_samples and rss is not None and fds is not None and span > 0:
                fitted.append((span, rss, fds))
                if anon is not None:
                    anon_fitted.append((span, anon))
        total = sum(span for span, _, _ in fitted)
        anon_total = sum(span for span, _ in anon_fitted)
        out[name] = {
            "incarnations": listed,
            "rss_mb_per_hour": (
                round(sum(s * r for s, r, _ in fitted) / total, 2) if total else None
            ),
            "fds_per_hour": round(sum(s * f for s, _, f in fitted) / total, 2) if total else None,
            "anon_mb_per_hour": (
                round(sum(s * a for s, a in anon_fitted) / anon_total, 2) if anon_total else None
            ),
        }
    return out


#: ``states[seq]`` of the producer's record ``seq``: not (yet) answered, acknowledged, failed.
PENDING, ACKED, FAILED = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Delivery:
    """What became of the records: acknowledged, consumed, lost, duplicated."""

    acked: int
    failed_sends: int
    consumed: int
    consumed_unique: int
    #: Acknowledged and never consumed.
    lost: int
    #: Deliveries beyond the first of a record (at-least-once redelivery after a rebalance).
    duplicates: int
    #: Consumed, but the producer saw their send fail (written although not acknowledged).
    unacked_consumed: int
    lost_sample: tuple[int, ...]

    @property
    def ok(self) -> bool:
        return self.lost == 0


def account_delivery(states: bytes | bytearray, counts: bytes | bytearray) -> Delivery:
    """``states[seq]``: ``PENDING``/``ACKED``/``FAILED`` per sequence number the producer
    used; ``counts[seq]``: how many times the consumer saw it (capped at 255). Arrays of
    bytes rather than sets, so half an hour at thousands of records a second stays small."""
    acked = failed = consumed = unique = lost = duplicates = unacked_consumed = 0
    lost_sample: list[int] = []
    for seq, (state, count) in enumerate(itertools.zip_longest(states, counts, fillvalue=0)):
        consumed += count
        if count:
            unique += 1
            duplicates += count - 1
        if state == ACKED:
            acked += 1
            if not count:
                lost += 1
                if len(lost_sample) < 20:
                    lost_sample.append(seq)
        else:
            failed += state == FAILED
            unacked_consumed += count > 0
    return Delivery(
        acked=acked,
        failed_sends=failed,
        consumed=consumed,
        consumed_unique=unique,
        lost=lost,
        duplicates=duplicates,
        unacked_consumed=unacked_consumed,
        lost_sample=tuple(lost_sample),
    )


@dataclass
class Window:
    """What happened between two samples: produce and end-to-end latencies, records consumed."""

    start_s: float
    produce_ms: list[float] = field(default_factory=list)
    e2e_ms: list[float] = field(default_factory=list)
    consumed: int = 0

    def summary(self, end_s: float) -> dict[str, Any]:
        span = max(end_s - self.start_s, 1e-9)

        def ms(values: list[float], q: float) -> float | None:
            found = percentile(values, q)
            return None if found is None else round(found, 2)

        return {
            "start_s": round(self.start_s, 2),
            "end_s": round(end_s, 2),
            "acked_per_s": round(len(self.produce_ms) / span, 1),
            "consumed_per_s": round(self.consumed / span, 1),
            "produce_p50_ms": ms(self.produce_ms, 50),
            "produce_p99_ms": ms(self.produce_ms, 99),
            "e2e_p50_ms": ms(self.e2e_ms, 50),
            "e2e_p99_ms": ms(self.e2e_ms, 99),
            "e2e_p999_ms": ms(self.e2e_ms, 99.9),
        }
