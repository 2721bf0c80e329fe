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

from loadtest.peers.histogram import Percentiles, WindowSummary

__all__ = ["RunResult", "SearchStep"]


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
