"""The Kafka benchmark's block of ``docs/benchmarks.md``: the goals table, the other figures,
the command and the machine, rendered from ``kafka.json``'s document and kept between two HTML
comments (``BEGIN``/``END``) so a run replaces its own block and nothing else of the page.

Pure functions of their arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["BEGIN", "END", "block", "replace_block"]

BEGIN = "<!-- bench-kafka: written by `make bench-kafka`, do not edit by hand -->"
END = "<!-- /bench-kafka -->"
HEADING = "## Kafka listener: confluent-kafka against Redis (`make bench-kafka`)"

#: Figures shown below the goals: key, label.
DETAILS = (
    ("kafka_produce_rps", "Kafka produce records/s (max-rate search, 1 KiB, RF 3, acks=all)"),
    ("kafka_produce_sustained", "Kafka: the rate found was sustained"),
    ("redis_produce_rps", "Redis XADD records/s (pipelined, same workload)"),
    ("redis_produce_sustained", "Redis: the rate found was sustained"),
    ("kafka_consume_rps", "Kafka consume records/s (backlog drain, one group member)"),
    ("redis_consume_rps", "Redis XREADGROUP records/s (backlog drain)"),
    ("kafka_group_join_s", "Kafka group join s (inside the drain)"),
    ("kafka_consume_after_join_rps", "Kafka consume records/s once joined"),
    ("consume_kafka_after_join_vs_redis", "Kafka consume once joined vs Redis"),
    ("kafka_backlog_records", "backlog records drained"),
    ("kafka_produce_e2e_p99_ms", "Kafka end-to-end p99 ms at the max rate"),
    ("redis_produce_e2e_p99_ms", "Redis end-to-end p99 ms at the max rate"),
    ("kafka_acks1_p99_ms", "idle acks=1 p99 ms (bare socket, Produce v9)"),
    ("kafka_acksall_p50_ms", "idle acks=all p50 ms (bare socket, Produce v9)"),
    ("kafka_acks1_confluent_p50_ms", "idle acks=1 p50 ms (confluent-kafka, flush per record)"),
    ("kafka_acks1_paced_p50_ms", "idle acks=1 p50 ms, requests 2 ms apart (bare socket)"),
    ("redis_xadd_p50_ms", "idle XADD p50 ms (redis.asyncio)"),
)


def _shown(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _load(value: Any) -> str:
    if not isinstance(value, list | tuple) or not value:
        return "?"
    return "/".join(f"{float(v):.2f}" for v in value)


def block(document: Mapping[str, Any]) -> str:
    """The generated block (markers included) for one run's ``kafka.json`` document."""
    machine = document.get("machine", {})
    lines = [
        BEGIN,
        HEADING,
        "",
        f"Measured {machine.get('measured_at', '?')} on {machine.get('cpus', '?')} CPUs "
        f"({machine.get('platform', '?')}, Python {machine.get('python', '?')}), load average "
        f"{_load(document.get('load_average_start'))} at the start and "
        f"{_load(document.get('load_average_end'))} at the end (the load generators and the "
        "matrix tests run on the same CPUs). `make bench-kafka` (`python -m "
        "loadtest.bench_kafka`); every figure and setting is in `loadtest/results/kafka.json`.",
        "",
        "| figure | value | goal | met |",
        "|---|---:|---|---|",
    ]
    for key, verdict in document.get("goals", {}).items():
        met = "yes" if verdict.get("met") else "**no**"
        value = _shown(verdict.get("value"))
        lines.append(f"| `{key}` | {value} | {verdict.get('goal')} | {met} |")
    lines += ["", "| other figures | value |", "|---|---:|"]
    lines += [f"| {label} | {_shown(document.get(key))} |" for key, label in DETAILS]
    names = document.get("clients_passing_names")
    if isinstance(names, list):
        failed = document.get("matrix_failed") or {}
        lines += [
            "",
            "Clients passing the whole matrix: "
            + (", ".join(names) or "none")
            + "."
            + "".join(f" {c} failed: {', '.join(cells)}." for c, cells in failed.items()),
        ]
    errors = [f"`{k}`: {v}" for k, v in document.items() if k.endswith("_error")]
    if errors:
        lines += ["", "Phases that failed: " + "; ".join(errors) + "."]
    lines.append(END)
    return "\n".join(lines) + "\n"


def replace_block(page: str, new_block: str) -> str:
    """``page`` with its block replaced by ``new_block`` (appended if it has none)."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        return page.rstrip("\n") + "\n\n" + new_block
    rest = page[end + len(END) :].lstrip("\n")
    return page[:start] + new_block + ("\n" + rest if rest else "")
