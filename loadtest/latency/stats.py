"""The pure figures of the latency benchmark: percentiles, result rows, CPU time from ``/proc``,
the headline keys of ``latency.json``, the goals, and the Markdown of ``docs/performance.md``.

Nothing here reads a clock or starts anything: times, ``/proc`` texts and samples come from the
caller, so each function is tested on its own (``tests/unit/loadtest/test_bench_latency.py``).

- **Rows**: one per measured path — ``system`` (``yak``, ``yak-before`` for the baseline
  build, ``redis``), ``path`` (``broker``: ``BrokerClient.produce`` to the leader; ``proxy``:
  the rest-proxy's native produce route; ``xadd``; ``e2e``: producer to consumer at ``rate``
  msg/s), the topic's replication factor ``rf``, ``acks`` (``0``, ``1``, ``all``; None for
  Redis) and percentiles in ms over ``samples`` observations (``p999`` and ``max`` for e2e,
  with ``ack_p50``/``ack_p99`` the producer's batch → acknowledgement time), and ``load``, the
  1-minute load average when its measurement started.
- **Percentiles** of the idle rows are exact nearest-rank over every sample (a few hundred);
  the e2e rows come from the peers harness's HDR histograms (within 0.1 %).
- **CPU per record**: user + system CPU seconds (``/proc/<pid>/stat`` fields 14 and 15, in
  clock ticks) of the rest-proxy and every broker, after minus before a fixed-size produce
  phase, divided by the records that phase got acknowledged, in µs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "BEGIN_MARKER",
    "END_MARKER",
    "GOALS",
    "CpuPhase",
    "Goal",
    "GoalSpec",
    "Row",
    "cpu_seconds_of_stat",
    "document",
    "evaluate_goals",
    "find_row",
    "headline",
    "latency_row",
    "markdown",
    "parse_proc_stat",
    "percentile",
    "rate_label",
    "splice",
]

BEGIN_MARKER = "<!-- bench-latency results: begin (written by make bench-latency) -->"
END_MARKER = "<!-- bench-latency results: end -->"


def percentile(ordered: Sequence[float], percent: float) -> float:
    """Nearest-rank ``percent`` (0..100) of an ascending, non-empty sequence."""
    if not ordered:
        raise ValueError("no samples")
    if not 0 <= percent <= 100:
        raise ValueError(f"a percentile is within 0..100, not {percent}")
    rank = math.ceil(percent / 100 * len(ordered))
    return float(ordered[min(max(rank, 1), len(ordered)) - 1])


@dataclass(frozen=True)
class Row:
    """One measured path (see the module docstring); latencies in ms."""

    system: str
    path: str
    rf: int | None
    acks: str | None
    p50: float | None
    p90: float | None
    p99: float | None
    samples: int
    p999: float | None = None
    max: float | None = None
    rate: int | None = None
    errors: int = 0
    #: e2e: publish latency (batch handed to the client → acknowledged), p50 and p99.
    ack_p50: float | None = None
    ack_p99: float | None = None
    #: The 1-minute load average when the row's measurement started (a shared machine).
    load: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}


def latency_row(
    system: str,
    path: str,
    rf: int | None,
    acks: str | None,
    samples_ms: Iterable[float],
    *,
    errors: int = 0,
) -> Row:
    """The idle row of ``samples_ms`` (exact percentiles over every sample; None without
    any)."""
    ordered = sorted(samples_ms)
    p50, p90, p99 = (percentile(ordered, q) if ordered else None for q in (50, 90, 99))
    return Row(system, path, rf, acks, p50, p90, p99, samples=len(ordered), errors=errors)


def rate_label(rate: int) -> str:
    """``1k`` for 1,000 msg/s, ``10k`` for 10,000, ``250`` for 250 (the headline keys' suffix)."""
    return f"{rate // 1000}k" if rate >= 1000 and rate % 1000 == 0 else str(rate)


def find_row(
    rows: Sequence[Row],
    system: str,
    path: str,
    *,
    rf: int | None = None,
    acks: str | None = None,
    rate: int | None = None,
) -> Row | None:
    """The first row with these fields (None ones match anything)."""
    for row in rows:
        if (row.system, row.path) != (system, path):
            continue
        if rf is not None and row.rf != rf:
            continue
        if acks is not None and row.acks != acks:
            continue
        if rate is not None and row.rate != rate:
            continue
        return row
    return None


# --- CPU ------------------------------------------------------------------------------------


def parse_proc_stat(text: str) -> tuple[int, int]:
    """(utime, stime) in clock ticks from the text of ``/proc/<pid>/stat``.

    The second field, the command name, is in parentheses and may hold spaces and parentheses
    itself, so the fields are counted from the last ``)``: state is field 3, utime 14, stime 15.
    """
    head, paren, rest = text.rpartition(")")
    if not paren or "(" not in head:
        raise ValueError(f"not a /proc/<pid>/stat line: {text[:80]!r}")
    fields = rest.split()
    if len(fields) < 13:
        raise ValueError(f"too few fields in /proc/<pid>/stat: {text[:80]!r}")
    return int(fields[11]), int(fields[12])


def cpu_seconds_of_stat(text: str, ticks_per_s: int) -> float:
    """User + system CPU seconds of a ``/proc/<pid>/stat`` text."""
    utime, stime = parse_proc_stat(text)
    return (utime + stime) / ticks_per_s


@dataclass
class CpuPhase:
    """A fixed-size max-rate produce phase on one build (``current`` or ``baseline``):
    records acknowledged, records answered with an error, whole requests that failed, its
    length, and CPU seconds per process (``rest-proxy-0``, ``broker-N``; ``coordinator`` too,
    shown but not counted) spent during it."""

    build: str
    records: int
    errors: int
    failed_requests: int
    elapsed_s: float
    cpu_s: dict[str, float] = field(default_factory=dict)
    #: Processes whose CPU is counted in ``cpu_us_per_record``.
    counted: tuple[str, ...] = ()
    #: The 1-minute load average when the phase started.
    load: float | None = None

    @property
    def records_per_s(self) -> float:
        return self.records / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def us_per_record(self, names: Iterable[str]) -> float | None:
        if self.records <= 0:
            return None
        return sum(self.cpu_s[name] for name in names) * 1e6 / self.records

    @property
    def cpu_us_per_record(self) -> float | None:
        return self.us_per_record(self.counted)

    def to_json(self) -> dict[str, Any]:
        per_process = {name: self.us_per_record([name]) for name in self.cpu_s}
        return {
            "build": self.build,
            "records": self.records,
            "errors": self.errors,
            "failed_requests": self.failed_requests,
            "elapsed_s": round(self.elapsed_s, 3),
            "records_per_s": round(self.records_per_s, 1),
            "cpu_s": {k: round(v, 3) for k, v in self.cpu_s.items()},
            "counted": list(self.counted),
            "cpu_us_per_record": _round(self.cpu_us_per_record),
            "cpu_us_per_record_by_process": {k: _round(v) for k, v in per_process.items()},
            "load": self.load,
        }


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


# --- headline and goals ---------------------------------------------------------------------


def headline(rows: Sequence[Row], cpu: Sequence[CpuPhase]) -> dict[str, float | None]:
    """The summary keys of ``latency.json`` (None where not measured):

    ``proxy_acks{0,1,all}_p50_ms`` / ``_p99_ms`` (RF 3) and ``proxy_rf1_…`` (RF 1),
    ``broker_acks…`` the same straight to the leader, each with ``_before`` for the baseline
    build; ``redis_xadd_p50_ms`` / ``_p99_ms``; ``e2e_p{50,99,999}_<rate>_ms`` (Yak),
    ``e2e_…_before`` and ``redis_e2e_…``; ``cpu_us_per_record`` and ``cpu_us_per_record_before``.
    """
    out: dict[str, float | None] = {}
    for system, suffix in (("yak", ""), ("yak-before", "_before")):
        for path in ("proxy", "broker"):
            for rf, middle in ((3, ""), (1, "rf1_")):
                for acks in ("0", "1", "all"):
                    row = find_row(rows, system, path, rf=rf, acks=acks)
                    for q in ("p50", "p99"):
                        value = None if row is None else getattr(row, q)
                        out[f"{path}_{middle}acks{acks}_{q}_ms{suffix}"] = value
    xadd = find_row(rows, "redis", "xadd")
    out["redis_xadd_p50_ms"] = None if xadd is None else xadd.p50
    out["redis_xadd_p99_ms"] = None if xadd is None else xadd.p99
    for row in rows:
        if row.path != "e2e" or row.rate is None:
            continue
        prefix, suffix = {"yak": ("", ""), "yak-before": ("", "_before")}.get(
            row.system, (f"{row.system}_", "")
        )
        for q in ("p50", "p99", "p999"):
            out[f"{prefix}e2e_{q}_{rate_label(row.rate)}_ms{suffix}"] = getattr(row, q)
    by_build = {phase.build: phase for phase in cpu}
    for build, key in (("current", "cpu_us_per_record"), ("baseline", "cpu_us_per_record_before")):
        phase = by_build.get(build)
        out[key] = None if phase is None else phase.cpu_us_per_record
    return out


@dataclass(frozen=True)
class GoalSpec:
    """``key`` (divided by ``versus`` when given) must be at most ``limit``."""

    name: str
    key: str
    limit: float
    versus: str | None = None


#: The goals of issue 18 on this benchmark's figures.
GOALS = (
    GoalSpec("proxy acks=1 p50 ≤ 1 ms", "proxy_acks1_p50_ms", 1.0),
    GoalSpec(
        "proxy acks=1 p50 ≤ 5x Redis XADD p50", "proxy_acks1_p50_ms", 5.0, "redis_xadd_p50_ms"
    ),
    GoalSpec("proxy acks=all RF 3 p50 ≤ 2 ms", "proxy_acksall_p50_ms", 2.0),
    GoalSpec("e2e p99 at 1,000 msg/s ≤ 5 ms", "e2e_p99_1k_ms", 5.0),
    GoalSpec("e2e p99 at 10,000 msg/s ≤ 2x Redis", "e2e_p99_10k_ms", 2.0, "redis_e2e_p99_10k_ms"),
    GoalSpec("CPU per record ≤ 0.5x before", "cpu_us_per_record", 0.5, "cpu_us_per_record_before"),
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
            "value": _round(self.value),
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
) -> dict[str, Any]:
    """The whole ``latency.json``: environment, settings, headline keys, goals, every row and
    every CPU phase."""
    figures = headline(rows, cpu)
    return {
        "benchmark": "latency",
        **environment,
        "settings": dict(settings),
        **{k: _round(v) for k, v in figures.items()},
        "goals": [goal.to_json() for goal in evaluate_goals(figures)],
        "rows": [row.to_json() for row in rows],
        "cpu": [phase.to_json() for phase in cpu],
    }


# --- Markdown -------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"


def markdown(doc: Mapping[str, Any]) -> str:
    """The generated results block of ``docs/performance.md`` from a ``latency.json``."""
    lines = [
        f"Run of {doc.get('date', '?')} with `{doc.get('command', '?')}` "
        f"(took {doc.get('wall_s', 0):.0f} s).",
        "",
        f"- Machine: {doc.get('machine', '?')}",
        f"- Load: {doc.get('load', '?')}; {doc.get('load_at_end', '?')} (each row: the 1-minute"
        " load average when it started)",
        f"- Code: {doc.get('revision', '?')}; baseline: {doc.get('baseline') or 'not measured'}",
        "",
        "### Goals",
        "",
        "| goal | measured | from | verdict |",
        "|---|--:|--:|---|",
    ]
    for goal in doc.get("goals", []):
        value = goal["value"]
        shown = "n/a"
        if value is not None:
            shown = f"{value:.2f}x" if goal["ratio"] else f"{value:.2f} ms"
        verdict = {None: "n/a", True: "ok", False: "missed"}[goal["ok"]]
        lines.append(f"| {goal['goal']} | {shown} | {goal['detail']} | {verdict} |")
    lines += [
        "",
        "### Every row (ms)",
        "",
        "| system | path | RF | acks | rate msg/s | p50 | p90 | p99 | p99.9 | ack p50 / p99 "
        "| samples | errors | load |",
        "|---|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for row in doc.get("rows", []):
        rate = f"{row['rate']:,}" if row.get("rate") else "idle"
        ack = "-"
        if row.get("ack_p50") is not None:
            ack = f"{_ms(row['ack_p50'])} / {_ms(row.get('ack_p99'))}"
        load = "-" if row.get("load") is None else f"{row['load']:.1f}"
        lines.append(
            f"| {row['system']} | {row['path']} | {row['rf'] or '-'} | {row['acks'] or '-'} "
            f"| {rate} | {_ms(row['p50'])} | {_ms(row['p90'])} | {_ms(row['p99'])} "
            f"| {_ms(row.get('p999'))} | {ack} | {row['samples']:,} | {row.get('errors', 0)} "
            f"| {load} |"
        )
    lines += [
        "",
        "### CPU per acknowledged record (rest-proxy + brokers)",
        "",
        "| build | records | s | records/s | µs/record | rest-proxy | brokers | coordinator "
        "| load |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for phase in doc.get("cpu", []):
        per = phase["cpu_us_per_record_by_process"]
        brokers = sum(v for k, v in per.items() if k.startswith("broker-") and v is not None)
        lines.append(
            f"| {phase['build']} | {phase['records']:,} | {phase['elapsed_s']:.1f} "
            f"| {phase['records_per_s']:,.0f} | {_ms(phase['cpu_us_per_record'])} "
            f"| {_ms(per.get('rest-proxy-0'))} | {_ms(brokers)} | {_ms(per.get('coordinator'))} "
            f"| {'-' if phase.get('load') is None else format(phase['load'], '.1f')} |"
        )
    return "\n".join(lines) + "\n"


def splice(text: str, block: str) -> str:
    """``text`` with what lies between ``BEGIN_MARKER`` and ``END_MARKER`` replaced by
    ``block``; ValueError if the markers are missing or out of order."""
    begin, end = text.find(BEGIN_MARKER), text.find(END_MARKER)
    if begin < 0 or end < begin:
        raise ValueError("the results markers are missing")
    head = text[: begin + len(BEGIN_MARKER)]
    return f"{head}\n\n{block.strip()}\n\n{text[end:]}"
