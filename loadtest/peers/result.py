"""What one run of one workload on one driver measured, and its JSON form.

Rates are messages per second over the measured phase: ``publish_rate`` acknowledged
messages, ``consume_rate`` deliveries summed over every subscription (a fan-out to four groups
consumes four times what is published). Latencies are ``Percentiles`` in ms. ``rate`` is the
offered rate of the measured phase — the one found by the search for max-rate workloads, the
workload's for fixed-rate ones, and 0 (as fast as possible) for a backlog drain; ``sustained``
says whether the measured phase kept up with it (95 % of the offered rate published, 95 % of
that consumed by every subscription; for a backlog, every record drained). For a backlog
``publish_rate`` is the rate at which it was written and ``consume_rate`` the rate at which
it was drained.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from loadtest.peers.histogram import Percentiles, Tally, Windows, WindowSummary
from loadtest.peers.rate_search import RateSearch
from loadtest.peers.workload import Workload

__all__ = ["RunResult", "SearchStep", "summarize"]


@dataclass(frozen=True)
class SearchStep:
    """One step of the max-rate search (``target`` None: the unthrottled probe)."""

    target: float | None
    published: float
    consumed: float
    publish_p99_ms: float
    held: bool


@dataclass(frozen=True)
class RunResult:
    """See the module docstring."""

    workload: str
    driver: str
    rate: float
    sustained: bool
    publish_rate: float
    consume_rate: float
    publish_latency: Percentiles
    e2e_latency: Percentiles
    published: int
    consumed: int
    errors: int
    duration_s: float
    windows: list[WindowSummary] = field(default_factory=list)
    search: list[SearchStep] = field(default_factory=list)
    drain_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["publish_latency"] = self.publish_latency._asdict()
        data["e2e_latency"] = self.e2e_latency._asdict()
        data["windows"] = [
            {
                "start_s": w.start_s,
                "publish_rate": w.publish_rate,
                "consume_rate": w.consume_rate,
                "publish_latency": w.publish_latency._asdict(),
                "e2e_latency": w.e2e_latency._asdict(),
            }
            for w in self.windows
        ]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunResult:
        windows = [
            WindowSummary(
                w["start_s"],
                w["publish_rate"],
                w["consume_rate"],
                Percentiles(**w["publish_latency"]),
                Percentiles(**w["e2e_latency"]),
            )
            for w in data["windows"]
        ]
        return cls(
            **{
                **data,
                "publish_latency": Percentiles(**data["publish_latency"]),
                "e2e_latency": Percentiles(**data["e2e_latency"]),
                "windows": windows,
                "search": [SearchStep(**s) for s in data["search"]],
            }
        )


def held(workload: Workload, search: RateSearch, overall: Tally, offered: float) -> bool:
    """Whether the measured phase kept up (see the module docstring); ``offered`` is the
    number of messages the offered rate asked for over the phase."""
    w = workload
    if w.backlog_records:
        return overall.consumed >= w.backlog_records * w.topics * w.subscriptions_per_topic
    return (
        (search.sustained or not w.max_rate)
        and overall.published >= search.keep_up * offered
        and overall.consumed >= search.keep_up * overall.published * w.subscriptions_per_topic
    )


def summarize(
    workload: Workload,
    driver: str,
    windows: Windows,
    search: RateSearch,
    *,
    rate: float,
    errors: int,
    drain_s: float = 0.0,
) -> RunResult:
    """The result of a run from what it recorded: rates over the measured span (for a backlog,
    publish over the span before the drain and consume over the drain)."""
    overall, elapsed = windows.overall(), windows.elapsed_s
    publish_rate = consume_rate = 0.0
    if workload.backlog_records:
        publish_rate = overall.published / max(elapsed - drain_s, 1e-9)
        consume_rate = overall.consumed / max(drain_s, 1e-9)
    elif elapsed:
        publish_rate, consume_rate = overall.published / elapsed, overall.consumed / elapsed
    return RunResult(
        workload=workload.name,
        driver=driver,
        rate=rate,
        sustained=held(workload, search, overall, rate * elapsed),
        publish_rate=publish_rate,
        consume_rate=consume_rate,
        publish_latency=overall.publish_latency.percentiles(),
        e2e_latency=overall.e2e_latency.percentiles(),
        published=overall.published,
        consumed=overall.consumed,
        errors=errors,
        duration_s=elapsed,
        windows=windows.summaries(),
        search=[
            SearchStep(s.target, s.published, s.consumed, s.publish_p99_ms, ok)
            for s, ok in search.steps
        ],
        drain_s=drain_s,
    )
