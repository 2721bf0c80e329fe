"""The comparison's outputs: ``loadtest/results/peers.json``, ``docs/benchmarks.md`` and its
plots (``plots``).

The ratios compare Yak with the peers on the workloads the issue names: produce throughput on
``1-topic-16-partitions-1kb`` (the maximum sustainable rate), consume throughput on the backlog
drain, and end-to-end p99 at the fixed 10,000 msg/s. ``ratios`` use the Yak REST driver (the
HTTP-first API is Yak's product); ``ratios_rf1`` the same with replication factor 1 (like
for like with the single-node peers); ``ratios_sdk`` the same for the Python SDK,
``ratios_kafka`` for confluent-kafka through the brokers' Kafka listeners. A ratio is None
when a figure is missing (a workload or driver left out of the run).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loadtest.peers.result import RunResult

__all__ = ["GOALS", "document", "markdown", "ratios"]

PRODUCE_WORKLOAD = "1-topic-16-partitions-1kb"
CONSUME_WORKLOAD = "1-topic-16-partitions-1kb-backlog-1m"
LATENCY_WORKLOAD = "1-topic-16-partitions-1kb-10k-rate"
#: ratio → (comparison, goal): ≥ for throughput, ≤ for latency.
GOALS: dict[str, tuple[str, float]] = {
    "produce_vs_redis": (">=", 1.0),
    "produce_vs_nats": (">=", 2.0),
    "consume_vs_redis": (">=", 1.0),
    "e2e_p99_vs_redis": ("<=", 2.0),
}


def _find(results: Sequence[RunResult], workload: str, driver: str) -> RunResult | None:
    return next((r for r in results if r.workload == workload and r.driver == driver), None)


def _ratio(mine: float | None, theirs: float | None) -> float | None:
    if mine is None or theirs is None or theirs <= 0:
        return None
    return mine / theirs


def ratios(results: Sequence[RunResult], yak: str = "yak-rest") -> dict[str, float | None]:
    """The four ratios of the issue for the Yak driver ``yak`` (see the module docstring)."""

    def figure(workload: str, driver: str, what: str) -> float | None:
        found = _find(results, workload, driver)
        if found is None:
            return None
        if what == "e2e_p99":
            return found.e2e_latency.p99 if found.e2e_latency.samples else None
        return float(getattr(found, what))

    return {
        "produce_vs_redis": _ratio(
            figure(PRODUCE_WORKLOAD, yak, "publish_rate"),
            figure(PRODUCE_WORKLOAD, "redis", "publish_rate"),
        ),
        "produce_vs_nats": _ratio(
            figure(PRODUCE_WORKLOAD, yak, "publish_rate"),
            figure(PRODUCE_WORKLOAD, "nats", "publish_rate"),
        ),
        "consume_vs_redis": _ratio(
            figure(CONSUME_WORKLOAD, yak, "consume_rate"),
            figure(CONSUME_WORKLOAD, "redis", "consume_rate"),
        ),
        "e2e_p99_vs_redis": _ratio(
            figure(LATENCY_WORKLOAD, yak, "e2e_p99"),
            figure(LATENCY_WORKLOAD, "redis", "e2e_p99"),
        ),
    }


def met(name: str, value: float | None) -> bool | None:
    """Whether ``value`` meets the goal of ratio ``name`` (None without a value)."""
    if value is None:
        return None
    comparison, goal = GOALS[name]
    return value >= goal if comparison == ">=" else value <= goal


def document(
    results: Sequence[RunResult], environment: dict[str, Any], drivers: dict[str, str]
) -> dict[str, Any]:
    """The JSON document of a run: environment, drivers, every result and the ratios."""
    return {
        "benchmark": "peers",
        **environment,
        "drivers": drivers,
        "ratios_use": "yak-rest",
        "ratios": ratios(results, "yak-rest"),
        "ratios_rf1": ratios(results, "yak-rest-rf1"),
        "ratios_sdk": ratios(results, "yak-sdk"),
        "ratios_kafka": ratios(results, "yak-kafka"),
        "goals": {k: f"{c} {g}" for k, (c, g) in GOALS.items()},
        "results": [r.to_json() for r in results],
    }


def write_json(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")


def _ms(value: float) -> str:
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def results_table(results: Sequence[RunResult]) -> list[str]:
    """One markdown table row per run, grouped by workload."""
    lines = [
        "| workload | system | offered msg/s | publish msg/s | consume msg/s | publish p50 / p99 "
        "ms | e2e p50 / p99 / p99.9 / max ms | errors |",
        "|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    for r in results:
        offered = "max" if r.rate == 0 else f"{r.rate:,.0f}"
        if not r.sustained:
            offered += " (not held)"
        p, e = r.publish_latency, r.e2e_latency
        lines.append(
            f"| {r.workload} | {r.driver} | {offered} | {r.publish_rate:,.0f} | "
            f"{r.consume_rate:,.0f} | {_ms(p.p50)} / {_ms(p.p99)} | {_ms(e.p50)} / {_ms(e.p99)} "
            f"/ {_ms(e.p999)} / {_ms(e.max)} | {r.errors} |"
        )
    return lines


def ratio_table(doc: dict[str, Any]) -> list[str]:
    lines = [
        "| ratio | Yak REST (RF 3) | Yak REST RF 1 | Yak SDK | Yak Kafka | goal |",
        "|---|--:|--:|--:|--:|---|",
    ]
    for name, (comparison, goal) in GOALS.items():
        cells = []
        for key in ("ratios", "ratios_rf1", "ratios_sdk", "ratios_kafka"):
            value = doc.get(key, {}).get(name)
            verdict = {True: "met", False: "missed", None: ""}[met(name, value)]
            cells.append("n/a" if value is None else f"{value:.2f}x {verdict}")
        lines.append(f"| `{name}` | {' | '.join(cells)} | {comparison} {goal:g}x |")
    return lines


def markdown(doc: dict[str, Any], results: Sequence[RunResult], plots: dict[str, str]) -> str:
    """The generated part of ``docs/benchmarks.md``."""
    env = doc["versions"]
    lines = [
        "## Results",
        "",
        f"Run of {doc['date']} with `{doc['command']}`"
        + (" (**quick**: a short smoke run, not a measurement)." if doc["quick"] else "."),
        "",
        f"- Machine: {doc['machine']}",
        f"- Load: {doc['load']}",
        f"- Versions: Yak {env['yak']}, {env['redis-server']}, {env['nats-server']}, "
        f"Python {env['python']}",
        "",
        "### Ratios (Yak / peer)",
        "",
        *ratio_table(doc),
        "",
        "### Every run",
        "",
        *results_table(results),
        "",
        "### Systems",
        "",
        *(f"- **{name}**: {text}" for name, text in doc["drivers"].items()),
        "",
        "### Over time",
        "",
    ]
    for workload, path in plots.items():
        lines += [f"![{workload}]({path})", ""]
    return "\n".join(lines)
