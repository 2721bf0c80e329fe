"""The results document, ``latency.json``: its headline keys, the goals of issues 18 and 34
judged on them, and the whole document (environment, settings, headline, goals, rows, CPU
phases, budget, GC pauses).

Pure: rows, phases and the budget come from the caller (``loadtest.bench_latency``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loadtest.latency.cpu import CpuPhase
from loadtest.latency.gc_figures import GcFigure
from loadtest.latency.histograms import StageFigure
from loadtest.latency.rows import Row, find_row, rate_label, rounded

__all__ = ["GOALS", "Goal", "GoalSpec", "document", "evaluate_goals", "gc_headline", "headline"]


def headline(rows: Sequence[Row], cpu: Sequence[CpuPhase]) -> dict[str, float | None]:
    """The summary keys of ``latency.json`` (None where not measured):

    ``proxy_acks{0,1,all}_p50_ms`` / ``_p99_ms`` (RF 3, the lean client) and ``proxy_rf1_…``
    (RF 1), ``proxy_httpx_…`` the same with ``httpx``,
    ``broker_acks…`` the same straight to the leader, each with ``_before`` for the baseline
    build; ``proxy_b2b_acks1_p50_ms`` / ``_p99_ms`` (back to back, RF 1, with ``_before``);
    ``redis_xadd_p50_ms`` / ``_p99_ms`` and ``redis_xadd_b2b_…``; ``e2e_p{50,99,999}_<rate>_ms``
    (Yak, the lean client), ``e2e_httpx_…`` (``httpx``), ``e2e_…_before`` and ``redis_e2e_…``;
    ``cpu_us_per_record`` and ``cpu_us_per_record_before``.
    """
    out: dict[str, float | None] = {}
    for system, suffix in (("yak", ""), ("yak-before", "_before")):
        for path in ("proxy", "proxy_httpx", "broker"):
            for rf, middle in ((3, ""), (1, "rf1_")):
                for acks in ("0", "1", "all"):
                    row = find_row(rows, system, path, rf=rf, acks=acks)
                    for q in ("p50", "p99"):
                        value = None if row is None else getattr(row, q)
                        out[f"{path}_{middle}acks{acks}_{q}_ms{suffix}"] = value
    for system, suffix in (("yak", ""), ("yak-before", "_before")):
        b2b = find_row(rows, system, "proxy_b2b", rf=1, acks="1")
        for q in ("p50", "p99"):
            out[f"proxy_b2b_acks1_{q}_ms{suffix}"] = None if b2b is None else getattr(b2b, q)
    for path in ("xadd", "xadd_b2b"):
        xadd = find_row(rows, "redis", path)
        for q in ("p50", "p99"):
            out[f"redis_{path}_{q}_ms"] = None if xadd is None else getattr(xadd, q)
    for row in rows:
        if row.path not in ("e2e", "e2e_httpx") or row.rate is None:
            continue
        prefix, suffix = {"yak": ("", ""), "yak-before": ("", "_before")}.get(
            row.system, (f"{row.system}_", "")
        )
        for q in ("p50", "p99", "p999"):
            out[f"{prefix}{row.path}_{q}_{rate_label(row.rate)}_ms{suffix}"] = getattr(row, q)
    by_build = {phase.build: phase for phase in cpu}
    for build, key in (("current", "cpu_us_per_record"), ("baseline", "cpu_us_per_record_before")):
        phase = by_build.get(build)
        out[key] = None if phase is None else phase.cpu_us_per_record
    return out


#: The services of the GC keys: the name in ``gc_…_<name>``, the service label.
_GC_NAMES = (("proxy", "rest-proxy"), ("broker", "broker"), ("coordinator", "coordinator"))


def gc_headline(
    gc: Mapping[str, Sequence[GcFigure]], gc_before: Mapping[str, Sequence[GcFigure]]
) -> dict[str, float | None]:
    """The GC keys of the end-to-end measurement (the budget's ``e2e_…``):
    ``gc_pause_p99_ms_<service>`` and ``gc_pauses_per_min_<service>`` for ``proxy``,
    ``broker`` (the three summed) and ``coordinator``, with ``_before`` for the baseline."""
    out: dict[str, float | None] = {}
    for windows, suffix in ((gc, ""), (gc_before, "_before")):
        e2e = next((figures for key, figures in windows.items() if key.startswith("e2e_")), ())
        by_service = {figure.service: figure for figure in e2e}
        for name, service in _GC_NAMES:
            figure = by_service.get(service)
            out[f"gc_pause_p99_ms_{name}{suffix}"] = None if figure is None else figure.p99_ms
            out[f"gc_pauses_per_min_{name}{suffix}"] = None if figure is None else figure.per_min
    return out


@dataclass(frozen=True)
class GoalSpec:
    """``key`` (divided by ``versus`` when given) must be at most ``limit``."""

    name: str
    key: str
    limit: float
    versus: str | None = None


#: The goals of issues 18 and 34 on this benchmark's figures (e2e: the lean client).
GOALS = (
    GoalSpec("proxy acks=1 p50 ≤ 1 ms", "proxy_acks1_p50_ms", 1.0),
    GoalSpec(
        "proxy acks=1 p50 ≤ 5x Redis XADD p50", "proxy_acks1_p50_ms", 5.0, "redis_xadd_p50_ms"
    ),
    GoalSpec("proxy acks=all RF 3 p50 ≤ 2 ms", "proxy_acksall_p50_ms", 2.0),
    GoalSpec("e2e p99 at 1,000 msg/s ≤ 5 ms", "e2e_p99_1k_ms", 5.0),
    GoalSpec("e2e p99 at 10,000 msg/s ≤ 2x Redis", "e2e_p99_10k_ms", 2.0, "redis_e2e_p99_10k_ms"),
    GoalSpec("CPU per record ≤ 0.5x before", "cpu_us_per_record", 0.5, "cpu_us_per_record_before"),
    GoalSpec("rest-proxy GC pause p99 at 1,000 msg/s ≤ 2 ms", "gc_pause_p99_ms_proxy", 2.0),
    GoalSpec("proxy back-to-back RF 1 acks=1 p50 ≤ 0.5 ms", "proxy_b2b_acks1_p50_ms", 0.5),
)


@dataclass(frozen=True)
class Goal:
    """A goal's outcome: ``value`` is the figure or ratio compared with ``limit`` (None: not
    measured in this run), ``detail`` says what it was computed from."""

    name: str
    value: float | None
    limit: float
    ratio: bool
    detail: str

    @property
    def ok(self) -> bool | None:
        return None if self.value is None else self.value <= self.limit

    @property
    def verdict(self) -> str:
        return {None: "n/a", True: "ok", False: "missed"}[self.ok]

    @property
    def shown(self) -> str:
        if self.value is None:
            return "n/a"
        return f"{self.value:.2f}x" if self.ratio else f"{self.value:.2f} ms"

    def to_json(self) -> dict[str, Any]:
        return {
            "goal": self.name,
            "value": rounded(self.value),
            "limit": self.limit,
            "ratio": self.ratio,
            "detail": self.detail,
            "ok": self.ok,
        }


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def evaluate_goals(
    figures: Mapping[str, float | None], goals: Sequence[GoalSpec] = GOALS
) -> list[Goal]:
    """Each goal of ``goals`` on the headline ``figures``."""
    out = []
    for spec in goals:
        mine = figures.get(spec.key)
        if spec.versus is None:
            out.append(Goal(spec.name, mine, spec.limit, False, f"{_figure(mine)} ms"))
            continue
        theirs = figures.get(spec.versus)
        value = None if mine is None or theirs is None or theirs <= 0 else mine / theirs
        unit = " µs" if spec.key.startswith("cpu") else " ms"
        detail = f"{_figure(mine)} / {_figure(theirs)}{unit}"
        out.append(Goal(spec.name, value, spec.limit, True, detail))
    return out


def document(
    rows: Sequence[Row],
    cpu: Sequence[CpuPhase],
    environment: Mapping[str, Any],
    settings: Mapping[str, Any],
    budget: Mapping[str, Sequence[StageFigure]] | None = None,
    gc: Mapping[str, Sequence[GcFigure]] | None = None,
    gc_before: Mapping[str, Sequence[GcFigure]] | None = None,
) -> dict[str, Any]:
    """The whole ``latency.json``: environment, settings, headline keys, goals, every row,
    every CPU phase, the budget per hop (``budget_key`` → the stages of that row's
    measurement) and the GC pauses of each service over the same measurements (``gc``, and
    ``gc_before`` for the baseline build)."""
    figures = headline(rows, cpu) | gc_headline(gc or {}, gc_before or {})
    return {
        "benchmark": "latency",
        **environment,
        "settings": dict(settings),
        **{k: rounded(v) for k, v in figures.items()},
        "goals": [goal.to_json() for goal in evaluate_goals(figures)],
        "rows": [row.to_json() for row in rows],
        "cpu": [phase.to_json() for phase in cpu],
        "budget": {key: [f.to_json() for f in stages] for key, stages in (budget or {}).items()},
        "gc": {key: [f.to_json() for f in figures] for key, figures in (gc or {}).items()},
        "gc_before": {
            key: [f.to_json() for f in figures] for key, figures in (gc_before or {}).items()
        },
    }
