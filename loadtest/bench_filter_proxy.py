"""The whole read path through the rest-proxy, unfiltered against a 1-in-10 filter: CPU of the
proxy process per record scanned (``python -m loadtest.bench_filter --proxy``).

A local cluster (etcd, a coordinator, one broker, one rest-proxy; ``loadtest.local_cluster``)
gets one topic of one partition holding ``bench_filter``'s records (``BATCHES`` x
``RECORDS_PER_BATCH`` 1 KiB JSON documents with a key and a header). Each case reads the whole
partition with stateless reads (``GET .../records?offset=&max_bytes=1MiB``, the default
encodings: values rendered as JSON), with no filter or with one of ``bench_filter.FILTERS``,
each of which lets 1 record in 10 through. The figure is the proxy process's CPU time (user +
system, ``psutil``) over the read, divided by the records scanned; rounds interleave the cases
and the best round counts (median beside it). The unfiltered read decodes and renders every
record; a filtered one decodes every record, runs the filter, and renders 1 in 10. Results go
to ``loadtest/results/filter_proxy.json``.
"""

from __future__ import annotations

import base64
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psutil
from rich.console import Console
from rich.table import Table

from loadtest.bench_filter import FILTERS, _batches
from loadtest.local_cluster import LocalCluster, local_cluster
from yak.etcd_server import EmbeddedEtcd, free_ports
from yak.record import decode_batch

ROUNDS = 5
TOPIC = "bench-filter"
READ_BYTES = 1024 * 1024
RESULTS = Path(__file__).parent / "results" / "filter_proxy.json"


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _produce(http: httpx.Client) -> int:
    """``bench_filter``'s records into the topic, one request per batch; how many."""
    created = http.post(
        "/api/v1/topics", json={"name": TOPIC, "partitions": 1, "replication_factor": 1}
    )
    assert created.status_code == 201, created.text
    count = 0
    for batch in _batches():
        records = decode_batch(batch).records
        body = {
            "key_encoding": "base64",
            "value_encoding": "base64",
            "header_encoding": "base64",
            "records": [
                {
                    "key": _b64(r.key),
                    "value": _b64(r.value),
                    "headers": [{"key": k, "value": _b64(v)} for k, v in r.headers],
                    "partition": 0,
                }
                for r in records
            ],
        }
        answer = http.post(f"/api/v1/topics/{TOPIC}/records", json=body)
        assert answer.status_code == 200, answer.text
        count += len(records)
    return count


def _read_all(http: httpx.Client, text: str | None) -> tuple[int, int]:
    """Read the partition to its end; (records returned, requests)."""
    offset = returned = requests = 0
    params: dict[str, str | int] = {"max_bytes": READ_BYTES}
    if text is not None:
        params["filter"] = text
    while True:
        page = http.get(
            f"/api/v1/topics/{TOPIC}/partitions/0/records", params={**params, "offset": offset}
        ).json()
        requests += 1
        returned += len(page["records"])
        offset = page["next_offset"]
        if offset >= page["high_watermark"]:
            return returned, requests


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def measure(cluster: LocalCluster) -> dict[str, Any]:
    """Produce, then time every case's whole read ``ROUNDS`` times (interleaved)."""
    process = psutil.Process(cluster.start_proxy(0).pid)
    cases: dict[str, str | None] = {"unfiltered": None, **FILTERS}
    micros: dict[str, list[float]] = {name: [] for name in cases}
    with httpx.Client(base_url=cluster.proxy_url(0), timeout=60) as http:
        scanned = _produce(http)
        for name, text in cases.items():  # warm up; check the filters pass 1 in 10
            returned, _ = _read_all(http, text)
            if (returned * 10 if text else returned) != scanned:
                raise SystemExit(f"{name}: {returned} of {scanned} records came back")
        for _ in range(ROUNDS):
            for name, text in cases.items():
                before = _cpu(process)
                _read_all(http, text)
                micros[name].append((_cpu(process) - before) * 1e6 / scanned)
    return {"scanned": scanned, "micros": micros}


def report(measured: dict[str, Any]) -> None:
    micros: dict[str, list[float]] = measured["micros"]
    base, base_median = min(micros["unfiltered"]), statistics.median(micros["unfiltered"])
    table = Table(title=f"Stateless reads through the proxy: {measured['scanned']:,} x 1 KiB JSON")
    for column in ("case", "filter", "best µs/rec", "median µs/rec", "ratio"):
        table.add_column(column, justify="left" if column in ("case", "filter") else "right")
    results: dict[str, Any] = {}
    for name, rounds in micros.items():
        best, median = min(rounds), statistics.median(rounds)
        results[f"{name}_proxy_cpu_us_per_record"] = round(best, 2)
        results[f"{name}_proxy_cpu_us_per_record_median"] = round(median, 2)
        if name != "unfiltered":
            results[f"{name}_ratio"] = round(best / base, 3)
            results[f"{name}_ratio_median"] = round(median / base_median, 3)
        table.add_row(
            name, FILTERS.get(name, ""), f"{best:.2f}", f"{median:.2f}", f"{best / base:.2f}"
        )
    results["meta"] = {
        "filters": FILTERS,
        "records": measured["scanned"],
        "read_max_bytes": READ_BYTES,
        "rounds": ROUNDS,
        "statistic": "best round of the proxy process's CPU (user + system); median beside",
        "cpus_on_machine": os.cpu_count(),
        "load_average": os.getloadavg(),
        "python": sys.version.split()[0],
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    console = Console(width=max(Console().width, 110))
    console.print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    console.print(f"wrote {RESULTS}")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="yak-bench-filter-") as tmp:
        folder = Path(tmp)
        client_port, peer_port = free_ports(2)
        etcd = EmbeddedEtcd(folder / "etcd", client_port, peer_port, unsafe_no_fsync=True)
        etcd.start()
        try:
            with local_cluster(folder, etcd, f"bench{uuid.uuid4().hex[:8]}", brokers=1) as cluster:
                measured = measure(cluster)
        finally:
            etcd.stop()
    report(measured)
