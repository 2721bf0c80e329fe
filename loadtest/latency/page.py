"""The generated blocks of ``docs/performance.md``: the results and the budget per hop, as
Markdown from a ``latency.json``, spliced between their markers.

Pure: the document and the page's text come from the caller (``loadtest.bench_latency``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loadtest.latency.rows import rate_label

__all__ = [
    "BEGIN_MARKER",
    "BUDGET_BEGIN_MARKER",
    "BUDGET_END_MARKER",
    "END_MARKER",
    "budget_markdown",
    "cpu_waits_markdown",
    "gc_markdown",
    "markdown",
    "page",
    "splice",
]

BEGIN_MARKER = "<!-- bench-latency results: begin (written by make bench-latency) -->"
END_MARKER = "<!-- bench-latency results: end -->"
BUDGET_BEGIN_MARKER = "<!-- bench-latency budget: begin (written by make bench-latency) -->"
BUDGET_END_MARKER = "<!-- bench-latency budget: end -->"


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
    lines += _budget_tables(doc, budget, "yak", "", doc.get("gc") or {}, doc.get("cpu_waits") or {})
    before = doc.get("budget_before") or {}
    if before:
        lines += [
            "",
            f"The same measurements of the baseline build ({doc.get('baseline', '?')}), in the "
            "same run:",
        ]
        gc_before = doc.get("gc_before") or {}
        cpu_before = doc.get("cpu_waits_before") or {}
        lines += _budget_tables(doc, before, "yak-before", " — baseline", gc_before, cpu_before)
    return "\n".join(lines) + "\n"


def gc_markdown(figures: Sequence[Mapping[str, Any]]) -> list[str]:
    """The GC table of one measurement: each service's collections (``gc`` of a
    ``latency.json``)."""
    lines = [
        "",
        "| service | collections | per minute | generations 0 / 1 / 2 | p50 ms | p99 ms |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for figure in figures:
        generations = " / ".join(str(count) for count in figure["by_generation"])
        service = "brokers (3, summed)" if figure["service"] == "broker" else figure["service"]
        lines.append(
            f"| {service} | {figure['collections']:,} | {figure['per_min']:,.1f} "
            f"| {generations} | {_stage_ms(figure['p50_ms'])} | {_stage_ms(figure['p99_ms'])} |"
        )
    return lines


def cpu_waits_markdown(figures: Sequence[Mapping[str, Any]]) -> list[str]:
    """The CPU table of one measurement: each service's CPU and wait for a CPU
    (``cpu_waits`` of a ``latency.json``), and their sums."""
    lines = [
        "",
        "| service | processes | CPU ms / s | waiting for a CPU ms / s | timeslices / s "
        "| wait per timeslice µs |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for figure in figures:
        lines.append(
            f"| {figure['service']} | {figure['processes']} | {figure['cpu_ms_per_s']:,.1f} "
            f"| {figure['wait_ms_per_s']:,.1f} | {figure['slices_per_s']:,.0f} "
            f"| {figure['wait_per_slice_us']:,.0f} |"
        )
    cpu = sum(f["cpu_ms_per_s"] for f in figures)
    wait = sum(f["wait_ms_per_s"] for f in figures)
    slices = sum(f["slices_per_s"] for f in figures)
    per_slice = 0.0 if slices == 0 else 1000 * wait / slices
    lines.append(
        f"| all | {sum(f['processes'] for f in figures)} | {cpu:,.1f} | {wait:,.1f} "
        f"| {slices:,.0f} | {per_slice:,.0f} |"
    )
    return lines


def _budget_tables(
    doc: Mapping[str, Any],
    budget: Mapping[str, Any],
    system: str,
    suffix: str,
    gc: Mapping[str, Sequence[Mapping[str, Any]]],
    cpu: Mapping[str, Sequence[Mapping[str, Any]]],
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
        if gc.get(key):
            lines += ["", "The collector's pauses over the same measurement:"]
            lines += gc_markdown(gc[key])
        if cpu.get(key):
            lines += [
                "",
                "Each process's CPU, and its wait for a CPU, over the same measurement "
                "(`/proc/<pid>/task/*/schedstat`; the machine has 2,000 CPU ms a second):",
            ]
            lines += cpu_waits_markdown(cpu[key])
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
