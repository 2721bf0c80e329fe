"""Benchmark of the RecordBatch v2 codec: records/s to encode and decode, on one core.

Run ``python -m loadtest.bench_codec`` (``make bench-codec``). In one thread (so on one core
at a time), each case encodes or decodes
batches of 1,000 records (16-byte random keys, 1 KiB random values, no headers), uncompressed
and with zstd. A raw baseline measured in the same run puts the numbers in context: joining
the same key and value bytes into one buffer and slicing them back out is the memory traffic
any codec must pay, so its records/s is a ceiling for pure data movement on this machine.
If kafka-python is installed, its pure-Python codec is measured too, for comparison.

Results are printed as a table and written to ``loadtest/results/codec.json``. The figure per
case is the best of several timed rounds (the machine is shared; the best round is the least
disturbed one), the median is recorded alongside. Rounds interleave the cases.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from yak.record import CompressionType, RecordInput, decode_batch, encode_batch

RECORDS_PER_BATCH = 1_000
KEY_SIZE = 16
VALUE_SIZE = 1_024
ROUNDS = 9
ROUND_SECONDS = 0.3
GOALS = {"encode_none_rps": 300_000, "decode_none_rps": 500_000}
RESULTS = Path(__file__).parent / "results" / "codec.json"


def _records() -> list[RecordInput]:
    now = time.time_ns() // 1_000_000
    return [
        RecordInput(os.urandom(KEY_SIZE), os.urandom(VALUE_SIZE), (), now + i)
        for i in range(RECORDS_PER_BATCH)
    ]


def _calls_per_round(work: Callable[[], object]) -> int:
    """How many calls of ``work`` (one batch each) fill about ``ROUND_SECONDS``."""
    work()  # warm up caches and lazy imports
    start = time.perf_counter()
    calls = 0
    while time.perf_counter() - start < ROUND_SECONDS / 4:
        work()
        calls += 1
    return max(calls * 4, 3)


def _measure(cases: dict[str, Callable[[], object]]) -> dict[str, list[float]]:
    """Records/s of every case in every round.

    Rounds interleave the cases, so a burst of load from other processes slows all of them
    alike instead of one case alone; the baseline stays comparable within the run.
    """
    calls = {name: _calls_per_round(work) for name, work in cases.items()}
    rates: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(ROUNDS):
        for name, work in cases.items():
            start = time.perf_counter()
            for _ in range(calls[name]):
                work()
            elapsed = time.perf_counter() - start
            rates[name].append(calls[name] * RECORDS_PER_BATCH / elapsed)
    return rates


def _baseline_cases(records: list[RecordInput]) -> dict[str, Callable[[], object]]:
    pieces = [p for r in records for p in (r.key or b"", r.value or b"")]
    joined = b"".join(pieces)
    step = KEY_SIZE + VALUE_SIZE

    def slice_out() -> list[bytes]:
        return [joined[i : i + step] for i in range(0, len(joined), step)]

    return {"baseline_join": lambda: b"".join(pieces), "baseline_slice": slice_out}


def _yak_cases(records: list[RecordInput]) -> dict[str, Callable[[], object]]:
    cases: dict[str, Callable[[], object]] = {}
    for name, codec in (("none", CompressionType.NONE), ("zstd", CompressionType.ZSTD)):
        cases[f"encode_{name}"] = partial(encode_batch, records, compression=codec)
        cases[f"decode_{name}"] = partial(decode_batch, encode_batch(records, compression=codec))
    return cases


def _kafka_python_cases(records: list[RecordInput]) -> dict[str, Callable[[], object]]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka.record.default_records import (
                DefaultRecordBatch,
                DefaultRecordBatchBuilder,
            )
    except ImportError:
        return {}

    def build() -> bytes:
        builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
        for i, r in enumerate(records):
            builder.append(i, r.timestamp, r.key, r.value, [])
        return bytes(builder.build())

    raw = build()

    def parse() -> list[Any]:
        batch = DefaultRecordBatch(raw)
        batch.validate_crc()
        return list(batch)

    return {"kafka_python_encode_none": build, "kafka_python_decode_none": parse}


def main() -> None:
    """Run every case, print the table and write ``loadtest/results/codec.json``."""
    records = _records()
    cases = {**_baseline_cases(records), **_yak_cases(records), **_kafka_python_cases(records)}
    results: dict[str, Any] = {}
    table = Table(title=f"RecordBatch v2 codec: {RECORDS_PER_BATCH} x 1 KiB records per batch")
    for column in ("case", "best rec/s", "median rec/s", "MB/s", "goal"):
        table.add_column(column, justify="left" if column == "case" else "right", no_wrap=True)
    for name, rates in _measure(cases).items():
        best, median = max(rates), statistics.median(rates)
        results[f"{name}_rps"] = round(best)
        results[f"{name}_rps_median"] = round(median)
        goal = GOALS.get(f"{name}_rps")
        verdict = "" if goal is None else f"{goal:,} {'met' if best >= goal else 'MISSED'}"
        mbps = best * (KEY_SIZE + VALUE_SIZE) / 1e6
        table.add_row(name, f"{best:,.0f}", f"{median:,.0f}", f"{mbps:,.0f}", verdict)
    console = Console(width=max(Console().width, 100))  # keep rows whole when piped
    console.print(table)
    results["meta"] = {
        "records_per_batch": RECORDS_PER_BATCH,
        "key_bytes": KEY_SIZE,
        "value_bytes": VALUE_SIZE,
        "rounds": ROUNDS,
        "statistic": "best round (median in *_rps_median)",
        "threads": 1,
        "cpus_on_machine": os.cpu_count(),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "goals": GOALS,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    console.print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
