"""The queue benchmark's block of ``docs/benchmarks.md``: the goals table, the other figures,
the command and the machine, rendered from ``queue.json``'s document and kept between two
HTML comments (``BEGIN``/``END``) so a run replaces its own block and nothing else of the page
(text after ``END`` — the hand-written reading of the figures — stays).

Pure functions of their arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["BEGIN", "END", "block", "replace_block"]

BEGIN = "<!-- bench-queue: written by `make bench-queue`, do not edit by hand -->"
END = "<!-- /bench-queue -->"
HEADING = "## Queues: share groups, delays, filters (`make bench-queue`)"

#: Figures shown below the goals: key, label.
DETAILS = (
    ("group_poll_rps", "group poll records/s (8 members, same data)"),
    ("share_ack_acquire_p50_ms", "acquire request p50 ms"),
    ("share_ack_acquire_p99_ms", "acquire request p99 ms"),
    ("share_ack_acknowledge_p50_ms", "acknowledge request p50 ms"),
    ("share_ack_acknowledge_p99_ms", "acknowledge request p99 ms"),
    ("group_poll_poll_p50_ms", "group poll request p50 ms"),
    ("delay_lateness_p50_ms", "delay lateness p50 ms"),
    ("delay_lateness_max_ms", "delay lateness max ms"),
    ("delay_records_early", "delayed records delivered early"),
    ("delay_records_missing", "delayed records never acquired"),
    ("delay_pending_delayed_topic_growth_mb", "RSS growth, 1M records with delays (MB)"),
    ("delay_pending_plain_topic_growth_mb", "RSS growth, same records without delays (MB)"),
    ("filter_unfiltered_cpu_us_per_record", "unfiltered read, proxy CPU µs/record"),
)


def _shown(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def block(document: Mapping[str, Any]) -> str:
    """The generated block (markers included) for one run's ``queue.json`` document."""
    machine = document.get("machine", {})
    lines = [
        BEGIN,
        HEADING,
        "",
        f"Measured {machine.get('measured_at', '?')} on {machine.get('cpus', '?')} CPUs "
        f"({machine.get('platform', '?')}, Python {machine.get('python', '?')}), load average "
        f"{_load(document.get('load_average_start'))} at the start and "
        f"{_load(document.get('load_average_end'))} at the end (the benchmark's own load "
        "generator runs on the same CPUs). "
        "`make bench-queue` (`python -m loadtest.bench_queue`); every figure is in "
        "`loadtest/results/queue.json`.",
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
    errors = [f"`{k}`: {v}" for k, v in document.items() if k.endswith("_error")]
    if errors:
        lines += ["", "Phases that failed: " + "; ".join(errors) + "."]
    lines.append(END)
    return "\n".join(lines) + "\n"


def _load(value: Any) -> str:
    if not isinstance(value, list | tuple) or not value:
        return "?"
    return "/".join(f"{float(v):.2f}" for v in value)


def replace_block(page: str, new_block: str) -> str:
    """``page`` with its block replaced by ``new_block`` (appended if it has none)."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        return page.rstrip("\n") + "\n\n" + new_block
    rest = page[end + len(END) :].lstrip("\n")
    return page[:start] + new_block + ("\n" + rest if rest else "")
