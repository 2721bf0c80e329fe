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
- **Budget per hop**: the services' stage histograms (``yak_proxy_produce_stage_seconds``,
  ``yak_proxy_poll_stage_seconds``, ``yak_broker_produce_stage_seconds``,
  ``yak_broker_fetch_stage_seconds``) read from ``/metrics`` texts (``stage_histograms``),
  summed over the brokers (``add_histograms``), the scrape before a measurement subtracted
  from the one after (``diff_histograms``), and each stage's p50/p99 computed from the diffed
  buckets as Prometheus' ``histogram_quantile`` does (``histogram_quantile``), in the order
  of the request's path (``budget_rows``; ``PRODUCE_PATH``, ``POLL_PATH``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "BEGIN_MARKER",
    "BUDGET_BEGIN_MARKER",
    "BUDGET_END_MARKER",
    "END_MARKER",
    "GOALS",
    "POLL_PATH",
    "PRODUCE_PATH",
    "RUNTIME_METRICS",
    "RUNTIME_PATH",
    "STAGE_METRICS",
    "CpuPhase",
    "Goal",
    "GoalSpec",
    "Histograms",
    "Row",
    "StageFigure",
    "StageKey",
    "add_histograms",
    "budget_key",
    "budget_markdown",
    "budget_rows",
    "cpu_seconds_of_stat",
    "diff_histograms",
    "document",
    "evaluate_goals",
    "find_row",
    "headline",
    "histogram_quantile",
    "latency_row",
    "markdown",
    "page",
    "parse_proc_stat",
    "percentile",
    "rate_label",
    "splice",
    "stage_histograms",
]

BEGIN_MARKER = "<!-- bench-latency results: begin (written by make bench-latency) -->"
END_MARKER = "<!-- bench-latency results: end -->"
BUDGET_BEGIN_MARKER = "<!-- bench-latency budget: begin (written by make bench-latency) -->"
BUDGET_END_MARKER = "<!-- bench-latency budget: end -->"


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


# --- budget per hop -------------------------------------------------------------------------

#: A stage histogram's series: (service, request, stage), e.g. ``("broker", "replica_fetch",
#: "wait")``; service ``rest-proxy`` or ``broker``, request ``produce``, ``poll``, ``fetch`` or
#: ``replica_fetch``.
StageKey = tuple[str, str, str]
#: Stage series → cumulative bucket counts by upper bound in seconds (``+Inf`` included).
Histograms = dict[StageKey, dict[float, float]]

#: The stage histograms read from ``/metrics``: family name → (service, request); a family
#: without a ``request`` label takes the request given here.
STAGE_METRICS = {
    "yak_proxy_produce_stage_seconds": ("rest-proxy", "produce"),
    "yak_proxy_poll_stage_seconds": ("rest-proxy", "poll"),
    "yak_broker_produce_stage_seconds": ("broker", "produce"),
    "yak_broker_fetch_stage_seconds": ("broker", "fetch"),
}

#: The runtime's own histograms (``yak.observability.runtime``), labelled by service: family →
#: the stage they are shown as (the GC's generations summed).
RUNTIME_METRICS = {
    "yak_event_loop_lag_seconds": "event loop lag",
    "yak_gc_pause_seconds": "gc pause",
}
#: What each process's runtime added: a timer's lateness and the collector's pauses — time a
#: request spends in no stage of its own.
RUNTIME_PATH: tuple[StageKey, ...] = (
    ("rest-proxy", "runtime", "event loop lag"),
    ("rest-proxy", "runtime", "gc pause"),
    ("broker", "runtime", "event loop lag"),
    ("broker", "runtime", "gc pause"),
)

#: A produce through the proxy, stage by stage along its path: the proxy's own stages, the
#: leader's (with the followers' replica fetches that acks=all replication waits on), the
#: proxy's whole broker round trip around them, and the response.
PRODUCE_PATH: tuple[StageKey, ...] = (
    ("rest-proxy", "produce", "read"),
    ("rest-proxy", "produce", "parse"),
    ("rest-proxy", "produce", "queue"),
    ("rest-proxy", "produce", "sender"),
    ("broker", "produce", "receive"),
    ("broker", "produce", "append"),
    ("broker", "produce", "replication"),
    ("broker", "replica_fetch", "wait"),
    ("broker", "replica_fetch", "read"),
    ("broker", "produce", "answer"),
    ("rest-proxy", "produce", "broker"),
    ("rest-proxy", "produce", "render"),
)
#: A poll through the proxy: the member's reconciliation, the fetch (the leaders' long poll
#: and reads inside it), decoding, rendering, saving the positions.
POLL_PATH: tuple[StageKey, ...] = (
    ("rest-proxy", "poll", "reconcile"),
    ("rest-proxy", "poll", "fetch"),
    ("broker", "fetch", "wait"),
    ("broker", "fetch", "read"),
    ("rest-proxy", "poll", "decode"),
    ("rest-proxy", "poll", "render"),
    ("rest-proxy", "poll", "save"),
)


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """The ``q`` (0..1) quantile of a histogram given as cumulative counts by bucket upper
    bound, as Prometheus' ``histogram_quantile`` computes it: the bucket holding rank
    ``q * count`` is found and the value interpolated linearly inside it (the first bucket
    starting at 0); a rank in the ``+Inf`` bucket gives the highest finite bound. None where
    Prometheus gives NaN: no ``+Inf`` bucket, fewer than two buckets, no observations."""
    if not 0 <= q <= 1:
        raise ValueError(f"a quantile is within 0..1, not {q}")
    bounds = sorted(buckets)
    if len(bounds) < 2 or not math.isinf(bounds[-1]):
        return None
    counts = [float(buckets[bound]) for bound in bounds]
    for index in range(1, len(counts)):  # as Prometheus: non-monotonic counts are evened out
        counts[index] = max(counts[index], counts[index - 1])
    observations = counts[-1]
    if observations <= 0:
        return None
    rank = q * observations
    b = next((i for i in range(len(bounds) - 1) if counts[i] >= rank), len(bounds) - 1)
    if b == len(bounds) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start, end, count = 0.0, bounds[b], counts[b]
    if b > 0:
        start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    if count <= 0:  # q = 0 on an empty first bucket: its lower end
        return start
    return start + (end - start) * (rank / count)


def stage_histograms(text: str) -> Histograms:
    """The stage histograms (``STAGE_METRICS``) of a ``/metrics`` text (prometheus_client's
    parser); the families a build does not export are simply not there."""
    found: Histograms = {}
    for family in text_string_to_metric_families(text):
        runtime = RUNTIME_METRICS.get(family.name)
        if runtime is not None and family.type == "histogram":
            for sample in family.samples:
                if sample.name.endswith("_bucket") and "le" in sample.labels:
                    key = (sample.labels.get("service", ""), "runtime", runtime)
                    into = found.setdefault(key, {})
                    bound = float(sample.labels["le"])
                    into[bound] = into.get(bound, 0.0) + sample.value
            continue
        owner = STAGE_METRICS.get(family.name)
        if owner is None or family.type != "histogram":
            continue
        service, request = owner
        for sample in family.samples:
            if not sample.name.endswith("_bucket") or "le" not in sample.labels:
                continue
            key = (service, sample.labels.get("request", request), sample.labels.get("stage", ""))
            found.setdefault(key, {})[float(sample.labels["le"])] = sample.value
    return found


def add_histograms(*parts: Mapping[StageKey, Mapping[float, float]]) -> Histograms:
    """The bucket counts of several processes' histograms summed, series by series (as
    ``sum by (le, stage)``)."""
    total: Histograms = {}
    for part in parts:
        for key, buckets in part.items():
            into = total.setdefault(key, {})
            for bound, count in buckets.items():
                into[bound] = into.get(bound, 0.0) + count
    return total


def diff_histograms(
    after: Mapping[StageKey, Mapping[float, float]],
    before: Mapping[StageKey, Mapping[float, float]],
) -> Histograms:
    """What each series of ``after`` observed since ``before``, bucket by bucket (a series
    that was not there before, or whose count went down — a restarted process —, counts from
    zero)."""
    out: Histograms = {}
    for key, buckets in after.items():
        earlier = before.get(key, {})
        if sum(buckets.values()) < sum(earlier.values()):
            earlier = {}
        out[key] = {bound: count - earlier.get(bound, 0.0) for bound, count in buckets.items()}
    return out


@dataclass(frozen=True)
class StageFigure:
    """One stage's figures over a measurement: observations and p50/p99 in ms (None without
    observations)."""

    service: str
    request: str
    stage: str
    count: int
    p50_ms: float | None
    p99_ms: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "request": self.request,
            "stage": self.stage,
            "count": self.count,
            "p50_ms": _round(self.p50_ms, 4),
            "p99_ms": _round(self.p99_ms, 4),
        }


def budget_rows(
    window: Mapping[StageKey, Mapping[float, float]], path: Sequence[StageKey]
) -> list[StageFigure]:
    """The stages of ``path`` that ``window`` (diffed histograms) has, in ``path``'s order."""
    rows = []
    for key in path:
        buckets = window.get(key)
        if buckets is None:
            continue
        count = round(max(buckets.values(), default=0.0))
        p50, p99 = (histogram_quantile(q, buckets) for q in (0.5, 0.99))
        rows.append(
            StageFigure(
                *key,
                count=count,
                p50_ms=None if p50 is None else p50 * 1000,
                p99_ms=None if p99 is None else p99 * 1000,
            )
        )
    return rows


def budget_key(path: str, rf: int | None, acks: str | None, rate: int | None) -> str:
    """The ``budget`` key of the row a budget was measured with: ``proxy_rf3_acks1``,
    ``proxy_rf3_acksall``, ``e2e_1k``."""
    if path == "e2e" and rate is not None:
        return f"e2e_{rate_label(rate)}"
    return f"{path}_rf{rf}_acks{acks}"


# --- headline and goals ---------------------------------------------------------------------


def headline(rows: Sequence[Row], cpu: Sequence[CpuPhase]) -> dict[str, float | None]:
    """The summary keys of ``latency.json`` (None where not measured):

    ``proxy_acks{0,1,all}_p50_ms`` / ``_p99_ms`` (RF 3, the lean client) and ``proxy_rf1_…``
    (RF 1), ``proxy_httpx_…`` the same with ``httpx``,
    ``broker_acks…`` the same straight to the leader, each with ``_before`` for the baseline
    build; ``redis_xadd_p50_ms`` / ``_p99_ms``; ``e2e_p{50,99,999}_<rate>_ms`` (Yak),
    ``e2e_…_before`` and ``redis_e2e_…``; ``cpu_us_per_record`` and ``cpu_us_per_record_before``.
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
    budget: Mapping[str, Sequence[StageFigure]] | None = None,
) -> dict[str, Any]:
    """The whole ``latency.json``: environment, settings, headline keys, goals, every row,
    every CPU phase and the budget per hop (``budget_key`` → the stages of that row's
    measurement)."""
    figures = headline(rows, cpu)
    return {
        "benchmark": "latency",
        **environment,
        "settings": dict(settings),
        **{k: _round(v) for k, v in figures.items()},
        "goals": [goal.to_json() for goal in evaluate_goals(figures)],
        "rows": [row.to_json() for row in rows],
        "cpu": [phase.to_json() for phase in cpu],
        "budget": {key: [f.to_json() for f in stages] for key, stages in (budget or {}).items()},
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


#: The ``where`` column of a budget table, by (service, request).
_WHERE = {
    ("rest-proxy", "produce"): "rest-proxy",
    ("rest-proxy", "poll"): "rest-proxy",
    ("broker", "produce"): "leader broker",
    ("broker", "replica_fetch"): "leader broker (followers' fetches)",
    ("broker", "fetch"): "leader broker (the member's fetches)",
    ("rest-proxy", "runtime"): "rest-proxy",
    ("broker", "runtime"): "brokers",
}


def _stage_ms(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def _stage_label(figure: Mapping[str, Any]) -> str:
    service, request, stage = figure["service"], figure["request"], figure["stage"]
    if (service, request, stage) == ("rest-proxy", "produce", "broker"):
        return "broker round trip"
    if request == "runtime":
        return str(stage)
    label = stage if request == "produce" else f"{request.replace('_', ' ')}: {stage}"
    return f"↳ {label}" if service == "broker" else label


def _json_row(
    doc: Mapping[str, Any],
    path: str,
    rf: int | None,
    acks: str | None,
    rate: str | None,
    system: str = "yak",
) -> Mapping[str, Any] | None:
    for row in doc.get("rows", []):
        if row["system"] != system or row["path"] != path:
            continue
        if rate is not None:
            if row.get("rate") and rate_label(row["rate"]) == rate:
                return dict(row)
        elif row["rf"] == rf and row["acks"] == acks and not row.get("rate"):
            return dict(row)
    return None


def _scenario(doc: Mapping[str, Any], key: str, system: str = "yak") -> tuple[str, str]:
    """The title of budget ``key``'s table and the line under it (what the client measured
    end to end in the same measurement, on ``system``'s rows)."""
    if key.startswith("e2e_"):
        label = key.removeprefix("e2e_")
        row = _json_row(doc, "e2e", None, None, label, system)
        rate = f"{row['rate']:,}" if row else label
        title = f"End to end at {rate} msg/s (RF 3, acks=all; produce, then the member's poll)"
        if row is None:
            return title, "No end-to-end row for this rate in the run."
        duration = doc.get("settings", {}).get("e2e_duration_s")
        over = f" over the same {duration:g} s" if isinstance(duration, int | float) else ""
        return title, (
            f"End to end, the client measured p50 {_ms(row['p50'])} ms and p99 "
            f"{_ms(row['p99'])} ms producer → consumer{over} (publish → acknowledgement p50 "
            f"{_ms(row.get('ack_p50'))} ms, p99 {_ms(row.get('ack_p99'))} ms)."
        )
    path, _, rest = key.partition("_rf")
    rf_text, _, acks = rest.partition("_acks")
    rf = int(rf_text) if rf_text.isdigit() else None
    title = f"Idle produce through the rest-proxy, RF {rf_text}, acks={acks}"
    row = _json_row(doc, path, rf, acks, None, system)
    if row is None:
        return title, "No row for this measurement in the run."
    return title, (
        f"End to end, the idle client measured p50 {_ms(row['p50'])} ms and p99 "
        f"{_ms(row['p99'])} ms over the same {row['samples']:,} requests (the `{system}` "
        f"`{path}` row, RF {rf}, acks={acks})."
    )


def budget_markdown(doc: Mapping[str, Any]) -> str:
    """The generated budget block of ``docs/performance.md``: a table per scenario of the
    ``budget`` of a ``latency.json``, stages in the order of the request's path — then the
    baseline build's tables (``budget_before``), when that build exports the stages."""
    budget = doc.get("budget") or {}
    lines = [f"From the run of {doc.get('date', '?')} above ({doc.get('revision', '?')})."]
    if not budget:
        return "\n".join([*lines, "", "No stage histograms in this run."]) + "\n"
    lines += _budget_tables(doc, budget, "yak", "")
    before = doc.get("budget_before") or {}
    if before:
        lines += [
            "",
            f"The same measurements of the baseline build ({doc.get('baseline', '?')}), in the "
            "same run:",
        ]
        lines += _budget_tables(doc, before, "yak-before", " — baseline")
    return "\n".join(lines) + "\n"


def _budget_tables(
    doc: Mapping[str, Any], budget: Mapping[str, Any], system: str, suffix: str
) -> list[str]:
    lines: list[str] = []
    for key, figures in budget.items():
        title, client = _scenario(doc, key, system)
        lines += [
            "",
            f"#### {title}{suffix}",
            "",
            "| where | stage | observations | p50 ms | p99 ms |",
            "|---|---|--:|--:|--:|",
        ]
        for figure in figures:
            where = _WHERE.get((figure["service"], figure["request"]), figure["service"])
            lines.append(
                f"| {where} | {_stage_label(figure)} | {figure['count']:,} "
                f"| {_stage_ms(figure['p50_ms'])} | {_stage_ms(figure['p99_ms'])} |"
            )
        lines += ["", client]
    return lines


def splice(
    text: str, block: str, begin_marker: str = BEGIN_MARKER, end_marker: str = END_MARKER
) -> str:
    """``text`` with what lies between ``begin_marker`` and ``end_marker`` (the results
    block's by default) replaced by ``block``; ValueError if the markers are missing or out
    of order."""
    begin, end = text.find(begin_marker), text.find(end_marker)
    if begin < 0 or end < begin:
        raise ValueError(f"the markers are missing: {begin_marker} … {end_marker}")
    head = text[: begin + len(begin_marker)]
    return f"{head}\n\n{block.strip()}\n\n{text[end:]}"


def page(text: str, doc: Mapping[str, Any]) -> str:
    """``docs/performance.md``'s ``text`` with both generated blocks, the results and the
    budget per hop, rewritten from ``doc`` (a ``latency.json``); ValueError if a block's
    markers are missing."""
    text = splice(text, markdown(doc))
    return splice(text, budget_markdown(doc), BUDGET_BEGIN_MARKER, BUDGET_END_MARKER)
