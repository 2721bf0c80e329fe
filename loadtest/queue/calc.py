"""The pure arithmetic of ``make bench-queue``: percentiles, acknowledgement ranges, a rate over
a measured window, lateness of delayed records, and the goals with their verdicts.

No I/O and no clock: times are arguments (seconds from ``time.perf_counter`` or epoch
milliseconds, as each function says). Safe from any thread.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "GOALS",
    "Goal",
    "Lateness",
    "Window",
    "accept_entries",
    "goal_verdicts",
    "lateness",
    "percentile",
    "summary_ms",
]


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending sequence; -1 if it is empty."""
    if not ordered:
        return -1.0
    return float(ordered[min(len(ordered) - 1, max(math.ceil(q * len(ordered)) - 1, 0))])


def summary_ms(samples: Iterable[float]) -> dict[str, float]:
    """p50, p99 and max (ms, 2 decimals) of request times given in seconds; -1 when none."""
    ordered = sorted(s * 1000 for s in samples)
    return {
        "p50_ms": round(percentile(ordered, 0.5), 2),
        "p99_ms": round(percentile(ordered, 0.99), 2),
        "max_ms": round(ordered[-1], 2) if ordered else -1.0,
        "samples": len(ordered),
    }


def accept_entries(acquired: Iterable[tuple[str, int, int]]) -> list[dict[str, Any]]:
    """The ``accept`` entries of one acknowledgement request for acquired (topic, partition,
    offset) triples: contiguous offsets of one partition become one ``first_offset``/
    ``last_offset`` range (as the SDK sends them), in topic, partition, offset order."""
    entries: list[dict[str, Any]] = []
    last: tuple[str, int, int] | None = None
    for topic, partition, offset in sorted(set(acquired)):
        if last is not None and (topic, partition, offset - 1) == last:
            entries[-1]["last_offset"] = offset
        else:
            entries.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "first_offset": offset,
                    "last_offset": offset,
                    "type": "accept",
                }
            )
        last = (topic, partition, offset)
    return entries


@dataclass
class Window:
    """Records counted inside a measured window ``[start, end)`` (perf_counter seconds); the
    window closes early at the last record if the data ran out (``exhausted_at``)."""

    start: float
    end: float
    records: int = 0
    last_at: float = 0.0
    exhausted_at: float | None = None

    def count(self, records: int, at: float) -> None:
        """``records`` finished at ``at``: counted if ``at`` lies inside the window."""
        if records and self.start <= at < self.end:
            self.records += records
            self.last_at = max(self.last_at, at)

    def seconds(self) -> float:
        """The window's length: to its end, or to the last record if the data ran out."""
        end = self.end
        if self.exhausted_at is not None and self.exhausted_at < self.end:
            end = max(self.last_at, self.start)
        return max(end - self.start, 0.0)

    def rate(self) -> float:
        seconds = self.seconds()
        return self.records / seconds if seconds > 0 else 0.0


@dataclass
class Lateness:
    """Acquisition time minus due time (ms) of delayed records, sorted, and how many came
    before their due time (``early``: must be 0)."""

    late_ms: list[float] = field(default_factory=list)
    early: int = 0
    earliest_ms: float = 0.0

    def figures(self) -> dict[str, float | int]:
        ordered = self.late_ms
        return {
            "delay_lateness_p50_ms": round(percentile(ordered, 0.5), 1),
            "delay_lateness_p99_ms": round(percentile(ordered, 0.99), 1),
            "delay_lateness_max_ms": round(ordered[-1], 1) if ordered else -1.0,
            "delay_records_early": self.early,
            "delay_earliest_ms": round(self.earliest_ms, 1),
            "delay_records_measured": len(ordered),
        }


def lateness(pairs: Iterable[tuple[float, float]]) -> Lateness:
    """``(acquired_at_ms, due_at_ms)`` pairs (epoch ms) → their lateness. A record acquired
    before its due time counts in ``early`` (and how early the worst was, a negative
    ``earliest_ms``); it is kept out of the percentiles."""
    result = Lateness()
    for acquired_at, due_at in pairs:
        late = acquired_at - due_at
        if late < 0:
            result.early += 1
            result.earliest_ms = min(result.earliest_ms, late)
        else:
            result.late_ms.append(late)
    result.late_ms.sort()
    return result


@dataclass(frozen=True)
class Goal:
    """Issue 30's goal for ``key``: at least (``at_least``) or at most ``bound``."""

    key: str
    bound: float
    at_least: bool
    text: str

    def met(self, value: float | None) -> bool:
        if value is None or value < 0:
            return False
        return value >= self.bound if self.at_least else value <= self.bound


GOALS = (
    Goal("share_ack_rps", 20_000, True, "≥ 20,000 records/s of 1 KiB, RF 3"),
    Goal("share_vs_group_ratio", 0.5, True, "≥ 0.5x the same run's group poll"),
    Goal("delay_lateness_p99_ms", 100, False, "≤ 100 ms"),
    Goal("delay_pending_1m_rss_mb", 200, False, "≤ 200 MB across the brokers"),
    Goal("filter_cost_ratio", 1.3, False, "≤ 1.3x the unfiltered read's CPU per record"),
)


def goal_verdicts(results: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each goal with the run's value and whether it was met (a missing value is not)."""
    verdicts: dict[str, dict[str, Any]] = {}
    for goal in GOALS:
        value = results.get(goal.key)
        number = float(value) if isinstance(value, int | float) else None
        verdicts[goal.key] = {"goal": goal.text, "value": value, "met": goal.met(number)}
    return verdicts
