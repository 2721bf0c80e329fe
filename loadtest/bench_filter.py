"""Benchmark of server-side filters: CPU per record scanned, filtered read against unfiltered.

Run ``python -m loadtest.bench_filter``. The unfiltered case decodes ``BATCHES`` record batches
of ``RECORDS_PER_BATCH`` records (1 KiB JSON values, a short key, one header) with
``yak.record.decode_batch`` — what every consume path does anyway. Each filtered case decodes
the same batches and runs a compiled filter (``yak.filters``) that lets 1 record in 10 through
over every record, as a consume path would. Issue 30's goal: a 1-in-10 filter costs at most
1.3x the unfiltered read's CPU per record scanned.

Filters, one per kind of field: a key prefix, a header, a JSON string member (which the raw-bytes
pre-check answers without parsing for the 9 records in 10 that do not hold the string), and a
JSON number member (which must parse every value).

CPU time is the process's (``time.process_time``), in one thread. Rounds interleave the cases so
that load from other processes slows all alike; the figure per case is the best round, the
median is recorded beside it. Results go to ``loadtest/results/filter.json``.

``--proxy`` measures the whole read path instead: stateless reads of these records through a
real rest-proxy, unfiltered against each filter, as CPU of the proxy process per record
scanned (``loadtest.bench_filter_proxy``; results in ``loadtest/results/filter_proxy.json``).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table

from yak.filters import compile_filter
from yak.record import RecordInput, decode_batch, encode_batch

BATCHES = 20
RECORDS_PER_BATCH = 1_000
VALUE_SIZE = 1_024
ROUNDS = 7
GOAL_RATIO = 1.3
FILTERS = {
    "key_prefix": 'key startswith "k7-"',
    "header": 'headers.region == "ap-south-1"',
    "json_string": 'value.status == "cancelled"',
    "json_number": "value.priority == 7",
}
RESULTS = Path(__file__).parent / "results" / "filter.json"
REGIONS = ["eu-west-1", "us-east-1", "us-west-2", "eu-central-1", "sa-east-1"]
WORDS = ["please", "leave", "the", "parcel", "at", "the", "back", "door", "and", "ring", "twice"]


def _value(i: int) -> bytes:
    """A ~1 KiB order document; status "cancelled" and priority 7 for 1 record in 10."""
    document: dict[str, Any] = {
        "id": i,
        "status": "cancelled" if i % 10 == 7 else ("shipped", "paid", "packed")[i % 3],
        "priority": i % 10,
        "customer": {"name": f"customer-{i % 997}", "tier": ("gold", "silver")[i % 2]},
        "items": [{"sku": f"sku-{(i + j) % 500}", "qty": j + 1, "price": 9.99} for j in range(4)],
    }
    size = VALUE_SIZE - len(orjson.dumps(document)) - len(',"note":""')
    words = (WORDS[(i * 7 + k) % len(WORDS)] for k in range(size))  # prose, not one letter
    document["note"] = " ".join(words)[:size]
    return orjson.dumps(document)


def _batches() -> list[bytes]:
    now = time.time_ns() // 1_000_000
    batches = []
    for b in range(BATCHES):
        records = []
        for j in range(RECORDS_PER_BATCH):
            i = b * RECORDS_PER_BATCH + j
            region = ("ap-south-1" if i % 10 == 7 else REGIONS[i % 5]).encode()
            key = f"k{i % 10}-{i}".encode()
            records.append(RecordInput(key, _value(i), (("region", region),), now))
        batches.append(encode_batch(records))
    return batches


def _cases(batches: list[bytes]) -> dict[str, Callable[[], int]]:
    def unfiltered() -> int:
        return sum(len(decode_batch(batch).records) for batch in batches)

    cases: dict[str, Callable[[], int]] = {"unfiltered": unfiltered}
    for name, text in FILTERS.items():
        select = compile_filter(text).select

        def filtered(select: Callable[[Any], list[Any]] = select) -> int:
            return sum(len(select(decode_batch(batch).records)) for batch in batches)

        cases[name] = filtered
    return cases


def _measure(cases: dict[str, Callable[[], int]]) -> dict[str, list[float]]:
    """CPU microseconds per record scanned, per case and round (rounds interleave cases)."""
    scanned = BATCHES * RECORDS_PER_BATCH
    for name, work in cases.items():
        passed = work()  # warm up; check the filters let 1 in 10 through
        if name != "unfiltered" and passed * 10 != scanned:
            raise SystemExit(f"{name}: {passed} of {scanned} records passed, not 1 in 10")
    micros: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(ROUNDS):
        for name, work in cases.items():
            start = time.process_time()
            work()
            micros[name].append((time.process_time() - start) * 1e6 / scanned)
    return micros


def main() -> None:
    """Run every case, print the table and write ``loadtest/results/filter.json``."""
    micros = _measure(_cases(_batches()))
    base, base_median = min(micros["unfiltered"]), statistics.median(micros["unfiltered"])
    table = Table(title=f"Filters, 1 in 10 passing: {BATCHES} x {RECORDS_PER_BATCH} x 1 KiB JSON")
    for column in ("case", "filter", "best µs/rec", "median µs/rec", "ratio", "goal"):
        table.add_column(column, justify="left" if column in ("case", "filter") else "right")
    results: dict[str, Any] = {}
    for name, rounds in micros.items():
        best, median = min(rounds), statistics.median(rounds)
        results[f"{name}_us_per_record"] = round(best, 3)
        results[f"{name}_us_per_record_median"] = round(median, 3)
        ratio = best / base
        verdict = ""
        if name != "unfiltered":
            results[f"{name}_cost_ratio"] = round(ratio, 3)
            results[f"{name}_cost_ratio_median"] = round(median / base_median, 3)
            verdict = "met" if ratio <= GOAL_RATIO else "MISSED"
        text = FILTERS.get(name, "")
        table.add_row(name, text, f"{best:.3f}", f"{median:.3f}", f"{ratio:.2f}", verdict)
    results["filter_cost_ratio"] = max(v for k, v in results.items() if k.endswith("_cost_ratio"))
    results["meta"] = {
        "filters": FILTERS,
        "batches": BATCHES,
        "records_per_batch": RECORDS_PER_BATCH,
        "value_bytes": VALUE_SIZE,
        "rounds": ROUNDS,
        "statistic": "best round of process CPU time (median in *_median)",
        "goal_ratio": GOAL_RATIO,
        "cpus_on_machine": os.cpu_count(),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    console = Console(width=max(Console().width, 110))
    console.print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    console.print(f"wrote {RESULTS}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--proxy"]:
        from loadtest import bench_filter_proxy  # a cluster's worth of imports: only here

        bench_filter_proxy.main()
    else:
        main()
