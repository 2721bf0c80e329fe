"""What the latency benchmark prints: the shared ``console`` (wide enough for the tables when
the output goes to a file or a pipe) and the tables of a run (``print_report``): every row,
before against now, CPU per record, the budget per hop, the GC pauses and the goals.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from loadtest.latency.cpu import CpuPhase
from loadtest.latency.rows import Row, find_row

__all__ = ["console", "print_report"]

#: Wide enough for the tables when the output goes to a file or a pipe.
console = Console(width=None if sys.stdout.isatty() else 150, log_path=False)


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"


def _fine_ms(value: float | None) -> str:
    """A stage's ms, to the µs below 1 ms."""
    return _ms(value) if value is None or value >= 1 else f"{value:.3f}"


def print_report(doc: dict[str, Any], rows: Sequence[Row], cpu: Sequence[CpuPhase]) -> None:
    table = Table(
        *("system", "path", "RF", "acks", "rate", "p50", "p90", "p99", "p99.9"),
        *("ack p50/p99", "samples", "err", "load"),
        title="produce latency, ms (idle: one 1 KiB record a request; e2e: producer → consumer)",
    )
    for row in rows:
        ack = "-" if row.ack_p50 is None else f"{_ms(row.ack_p50)}/{_ms(row.ack_p99)}"
        table.add_row(
            row.system,
            row.path,
            str(row.rf or "-"),
            row.acks or "-",
            f"{row.rate:,}/s" if row.rate else "idle",
            _ms(row.p50),
            _ms(row.p90),
            _ms(row.p99),
            _ms(row.p999),
            ack,
            f"{row.samples:,}",
            str(row.errors),
            "-" if row.load is None else f"{row.load:.1f}",
        )
    console.print(table)
    befores = [r for r in rows if r.system == "yak-before"]
    if befores:
        compare = Table(
            "path",
            "RF",
            "acks",
            "rate",
            "p50 before",
            "p50 now",
            "p99 before",
            "p99 now",
            title=f"before ({doc.get('baseline')}) and now (ms)",
        )
        for before in befores:
            now = find_row(
                rows, "yak", before.path, rf=before.rf, acks=before.acks, rate=before.rate
            )
            compare.add_row(
                before.path,
                str(before.rf or "-"),
                before.acks or "-",
                f"{before.rate:,}/s" if before.rate else "idle",
                _ms(before.p50),
                _ms(None if now is None else now.p50),
                _ms(before.p99),
                _ms(None if now is None else now.p99),
            )
        console.print(compare)
    cpu_table = Table(
        "build",
        "records",
        "s",
        "records/s",
        "µs/record",
        "proxy µs",
        "brokers µs",
        "coordinator µs",
        "etcd µs",
        "errors",
        "load",
        title="CPU per acknowledged record (counted: rest-proxy + brokers)",
    )
    for phase in cpu:
        per = {name: phase.us_per_record([name]) for name in phase.cpu_s}
        brokers = sum(v for k, v in per.items() if k.startswith("broker-") and v is not None)
        cpu_table.add_row(
            phase.build,
            f"{phase.records:,}",
            f"{phase.elapsed_s:.1f}",
            f"{phase.records_per_s:,.0f}",
            _ms(phase.cpu_us_per_record),
            _ms(per.get("rest-proxy-0")),
            _ms(brokers),
            _ms(per.get("coordinator")),
            _ms(per.get("etcd")),
            f"{phase.errors + phase.failed_requests}",
            "-" if phase.load is None else f"{phase.load:.1f}",
        )
    console.print(cpu_table)
    for key, stages in doc.get("budget", {}).items():
        budget_table = Table(
            "service",
            "request",
            "stage",
            "count",
            "p50",
            "p99",
            title=f"budget per hop: {key} (ms)",
        )
        for stage in stages:
            budget_table.add_row(
                stage["service"],
                stage["request"],
                stage["stage"],
                f"{stage['count']:,}",
                _fine_ms(stage["p50_ms"]),
                _fine_ms(stage["p99_ms"]),
            )
        console.print(budget_table)
    for field, build in (("gc", "now"), ("gc_before", "before")):
        for key, figures in doc.get(field, {}).items():
            gc_table = Table(
                *("service", "collections", "per min", "gen 0/1/2", "p50", "p99"),
                title=f"GC pauses: {key}, {build} (ms)",
            )
            for figure in figures:
                gc_table.add_row(
                    figure["service"],
                    f"{figure['collections']:,}",
                    f"{figure['per_min']:,.1f}",
                    "/".join(str(count) for count in figure["by_generation"]),
                    _fine_ms(figure["p50_ms"]),
                    _fine_ms(figure["p99_ms"]),
                )
            console.print(gc_table)
    goals = Table("goal", "measured", "from", "verdict", title="goals (issues 18 and 34)")
    for goal in doc.get("goals", []):  # judged on every headline key, the GC's included
        ok = goal["ok"]
        style = {None: "dim", True: "green", False: "red"}[ok]
        verdict = {None: "n/a", True: "ok", False: "missed"}[ok]
        shown = "n/a"
        if goal["value"] is not None:
            shown = f"{goal['value']:.2f}x" if goal["ratio"] else f"{goal['value']:.2f} ms"
        goals.add_row(goal["goal"], shown, goal["detail"], f"[{style}]{verdict}[/]")
    console.print(goals)
