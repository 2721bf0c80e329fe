"""Avro against JSON through the rest-proxy's v2 API, in one run (``make bench-schema``).

A local cluster (etcd, a coordinator, one broker; ``loadtest.local_cluster``), a
``yak-schema-registry`` process and one rest-proxy given its URL. The same records — a
12-field user event, about 240 bytes as JSON — are produced as
``application/vnd.kafka.json.v2+json`` and as ``application/vnd.kafka.avro.v2+json`` (by
``value_schema_id``, the schema registered once before the timing), each to its own topic of
``PARTITIONS`` partitions (RF 1: the proxy's work is what differs). ``CONCURRENCY`` clients keep
one request of ``RECORDS_PER_REQUEST`` records each in flight for ``PHASE_S`` seconds; bodies
are built once, so the client's cost is the same for both. Rounds interleave JSON and Avro and
the best round of each counts (the median beside it), so a noisy neighbour hurts both alike.
Then a v2 consumer of each format reads its topic back from the beginning (records/s), and the
proxy process's CPU per produced record is read with ``psutil``.

``avro_vs_json_ratio`` = best Avro produce rate / best JSON produce rate (goal ≥ 0.7, issue
33). ``--code CHECKOUT`` runs the services on another checkout's code (``local_cluster``'s
``python_path``) and writes nothing: a change is compared with the code before it by two runs
in one sitting. Results: ``loadtest/results/schema.json`` and this benchmark's block of
``docs/benchmarks.md`` (between its own markers; the page's other blocks are kept).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import psutil

from loadtest.local_cluster import LocalCluster, code_path, local_cluster
from yak.etcd_server import EmbeddedEtcd, free_ports
from yak.supervisor import ProcessSpec

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "loadtest" / "results" / "schema.json"
DOCS = ROOT / "docs" / "benchmarks.md"
BEGIN = "<!-- bench-schema: written by `make bench-schema`, do not edit by hand -->"
END = "<!-- /bench-schema -->"
GOAL = 0.7
PARTITIONS = 4
CONCURRENCY = 8
RECORDS_PER_REQUEST = 200
PHASE_S = 8.0
ROUNDS = 3
SCHEMA = {
    "type": "record",
    "name": "UserEvent",
    "namespace": "yak.bench",
    "fields": [
        {"name": "user_id", "type": "long"},
        {"name": "session", "type": "string"},
        {"name": "event", "type": {"type": "enum", "name": "Kind", "symbols": ["VIEW", "BUY"]}},
        {"name": "page", "type": "string"},
        {"name": "referrer", "type": ["null", "string"], "default": None},
        {"name": "price", "type": "double"},
        {"name": "quantity", "type": "int"},
        {"name": "currency", "type": "string"},
        {"name": "country", "type": "string"},
        {"name": "device", "type": "string"},
        {"name": "ts", "type": "long"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}
MEDIA = {"json": "application/vnd.kafka.json.v2+json", "avro": "application/vnd.kafka.avro.v2+json"}


def event(i: int) -> dict[str, Any]:
    return {
        "user_id": 1_000_000 + i,
        "session": f"s-{i:08x}-{(i * 7919) % 65536:04x}",
        "event": "BUY" if i % 5 == 0 else "VIEW",
        "page": f"/products/{i % 997}/details?variant={i % 13}",
        "referrer": None if i % 3 else "https://example.com/search?q=yak",
        "price": round(9.99 + (i % 100) * 1.25, 2),
        "quantity": 1 + i % 4,
        "currency": "EUR",
        "country": ["NO", "FR", "DE", "US"][i % 4],
        "device": "mobile" if i % 2 else "desktop",
        "ts": 1_765_000_000_000 + i,
        "tags": ["bench", f"cohort-{i % 10}"],
    }


def start_registry(cluster: LocalCluster) -> str:
    (port,) = free_ports(1)
    url = f"http://127.0.0.1:{port}"
    cluster.supervisor.start(
        ProcessSpec(
            name="schema-registry",
            argv=(
                str(Path(sys.executable).with_name("yak-schema-registry")),
                *("--host", "127.0.0.1", "--port", str(port)),
            ),
            log_path=cluster.folder / "logs" / "schema-registry.log",
            health_url=f"{url}/readyz",
            url=url,
            env={"YAK_ETCD": cluster.etcd.endpoint, "YAK_CLUSTER_ID": cluster.cluster_id},
        )
    )
    return url


async def create_topic(http: httpx.AsyncClient, name: str) -> None:
    body = {"name": name, "partitions": PARTITIONS, "replication_factor": 1}
    created = await http.post("/api/v1/topics", json=body)
    assert created.status_code == 201, created.text
    deadline = time.monotonic() + 20
    while True:
        parts = (await http.get(f"/topics/{name}")).json().get("partitions", [])
        if len(parts) == PARTITIONS and all(p["leader"] >= 0 for p in parts):
            return
        assert time.monotonic() < deadline, f"{name} has no leaders"
        await asyncio.sleep(0.05)  # another process's metadata: nothing to await here


async def bodies(http: httpx.AsyncClient, topics: dict[str, str]) -> dict[str, bytes]:
    """One request body per format (the Avro one by schema id, registered first)."""
    records = [{"value": event(i)} for i in range(RECORDS_PER_REQUEST)]
    first = await http.post(
        f"/topics/{topics['avro']}",
        content=orjson.dumps({"value_schema": json.dumps(SCHEMA), "records": records[:1]}),
        headers={"content-type": MEDIA["avro"]},
    )
    assert first.status_code == 200, first.text
    schema_id = first.json()["value_schema_id"]
    return {
        "json": orjson.dumps({"records": records}),
        "avro": orjson.dumps({"value_schema_id": schema_id, "records": records}),
    }


async def produce_phase(
    http: httpx.AsyncClient, topic: str, fmt: str, body: bytes, phase_s: float
) -> int:
    """Records acknowledged in ``phase_s`` seconds by ``CONCURRENCY`` request loops."""
    stop = time.monotonic() + phase_s
    headers = {"content-type": MEDIA[fmt]}

    async def loop() -> int:
        sent = 0
        while time.monotonic() < stop:
            answer = await http.post(f"/topics/{topic}", content=body, headers=headers)
            assert answer.status_code == 200, answer.text[:300]
            sent += RECORDS_PER_REQUEST
        return sent

    return sum(await asyncio.gather(*(loop() for _ in range(CONCURRENCY))))


async def consume_rate(http: httpx.AsyncClient, topic: str, fmt: str, total: int) -> float:
    """Records/s of a v2 consumer of ``fmt`` reading ``topic`` from its beginning."""
    group, name = f"bench-{fmt}-{uuid.uuid4().hex[:6]}", "c"
    created = await http.post(f"/consumers/{group}", json={"name": name, "format": fmt})
    assert created.status_code == 200, created.text
    base = f"/consumers/{group}/instances/{name}"
    partitions = {"partitions": [{"topic": topic, "partition": p} for p in range(PARTITIONS)]}
    await http.post(f"{base}/assignments", json=partitions)
    await http.post(f"{base}/positions/beginning", json=partitions)
    accept = {"accept": f"application/vnd.kafka.{fmt}.v2+json"}
    read, started = 0, time.perf_counter()
    while read < total:
        answer = await http.get(f"{base}/records?timeout=1000&max_bytes=4194304", headers=accept)
        assert answer.status_code == 200, answer.text[:300]
        page = answer.json()
        if not page:
            break
        read += len(page)
    elapsed = time.perf_counter() - started
    await http.delete(base)
    return read / elapsed


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


async def measure(
    cluster: LocalCluster, proxy: psutil.Process, rounds: int, phase_s: float
) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=CONCURRENCY * 2)
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=60, limits=limits) as http:
        topics = {fmt: f"bench-schema-{fmt}-{uuid.uuid4().hex[:6]}" for fmt in MEDIA}
        for topic in topics.values():
            await create_topic(http, topic)
        body = await bodies(http, topics)
        rates: dict[str, list[float]] = {fmt: [] for fmt in MEDIA}
        cpu: dict[str, list[float]] = {fmt: [] for fmt in MEDIA}
        produced = dict.fromkeys(MEDIA, 0)
        for _ in range(rounds):
            for fmt in MEDIA:
                before, started = _cpu(proxy), time.perf_counter()
                count = await produce_phase(http, topics[fmt], fmt, body[fmt], phase_s)
                elapsed = time.perf_counter() - started
                rates[fmt].append(count / elapsed)
                cpu[fmt].append((_cpu(proxy) - before) * 1e6 / count)
                produced[fmt] += count
        consumed = {fmt: await consume_rate(http, topics[fmt], fmt, produced[fmt]) for fmt in MEDIA}
    return {"rates": rates, "cpu": cpu, "consumed": consumed, "produced": produced}


def document(measured: dict[str, Any], load_start: tuple[float, ...]) -> dict[str, Any]:
    rates, cpu, consumed = measured["rates"], measured["cpu"], measured["consumed"]
    json_best, avro_best = max(rates["json"]), max(rates["avro"])
    ratio = avro_best / json_best
    return {
        "avro_vs_json_ratio": round(ratio, 3),
        "avro_vs_json_ratio_median": round(
            statistics.median(rates["avro"]) / statistics.median(rates["json"]), 3
        ),
        "json_produce_rps": round(json_best, 1),
        "avro_produce_rps": round(avro_best, 1),
        "json_produce_rps_rounds": [round(r, 1) for r in rates["json"]],
        "avro_produce_rps_rounds": [round(r, 1) for r in rates["avro"]],
        "json_proxy_cpu_us_per_record": round(min(cpu["json"]), 2),
        "avro_proxy_cpu_us_per_record": round(min(cpu["avro"]), 2),
        "json_consume_rps": round(consumed["json"], 1),
        "avro_consume_rps": round(consumed["avro"], 1),
        "avro_vs_json_consume_ratio": round(consumed["avro"] / consumed["json"], 3),
        "goals": {
            "avro_vs_json_ratio": {
                "value": round(ratio, 3),
                "goal": f"≥ {GOAL}x the same run's JSON produce rate",
                "met": ratio >= GOAL,
            }
        },
        "plan": {
            "partitions": PARTITIONS,
            "replication_factor": 1,
            "concurrency": CONCURRENCY,
            "records_per_request": RECORDS_PER_REQUEST,
            "phase_s": PHASE_S,
            "rounds": ROUNDS,
            "record_json_bytes": len(orjson.dumps(event(1))),
            "statistic": "best round of each format (rounds interleaved); median beside",
        },
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    }


def intro(doc: dict[str, Any]) -> str:
    machine, plan = doc["machine"], doc["plan"]
    loads = [
        "/".join(f"{v:.2f}" for v in doc[key]) for key in ("load_average_start", "load_average_end")
    ]
    return (
        f"Measured {machine['measured_at']} on {machine['cpus']} CPUs "
        f"({machine['platform']}, Python {machine['python']}), load average {loads[0]} at the "
        f"start and {loads[1]} at the end. One broker, topics of {plan['partitions']} "
        f"partitions (RF 1), {plan['concurrency']} clients each keeping one v2 request of "
        f"{plan['records_per_request']} records (~{plan['record_json_bytes']} bytes of JSON "
        f"each) in flight, {plan['rounds']} interleaved rounds of {plan['phase_s']:.0f} s per "
        "format; `make bench-schema` (`python -m loadtest.bench_schema`), every figure in "
        "`loadtest/results/schema.json`."
    )


def block(doc: dict[str, Any]) -> str:
    """This run's block of docs/benchmarks.md, markers included."""
    goal = doc["goals"]["avro_vs_json_ratio"]
    rows = [
        ("JSON produce records/s (best round)", f"{doc['json_produce_rps']:,.0f}"),
        ("Avro produce records/s (best round)", f"{doc['avro_produce_rps']:,.0f}"),
        ("Avro/JSON produce, medians", f"{doc['avro_vs_json_ratio_median']:.3f}"),
        ("proxy CPU µs/record, JSON produce", f"{doc['json_proxy_cpu_us_per_record']:.2f}"),
        ("proxy CPU µs/record, Avro produce", f"{doc['avro_proxy_cpu_us_per_record']:.2f}"),
        ("JSON consume records/s (v2 consumer)", f"{doc['json_consume_rps']:,.0f}"),
        ("Avro consume records/s (v2 consumer)", f"{doc['avro_consume_rps']:,.0f}"),
    ]
    return (
        "\n".join(
            [
                BEGIN,
                "## Schema formats: Avro against JSON through the proxy (`make bench-schema`)",
                "",
                intro(doc),
                "",
                "| figure | value | goal | met |",
                "|---|---:|---|---|",
                f"| `avro_vs_json_ratio` | {goal['value']:.3f} | {goal['goal']} | "
                f"{'yes' if goal['met'] else '**no**'} |",
                "",
                "| other figures | value |",
                "|---|---:|",
                *[f"| {label} | {value} |" for label, value in rows],
                END,
            ]
        )
        + "\n"
    )


def replace_block(page: str, new_block: str) -> str:
    """``page`` with this benchmark's block replaced (appended if it has none)."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        return page.rstrip("\n") + "\n\n" + new_block
    rest = page[end + len(END) :].lstrip("\n")
    return page[:start] + new_block + ("\n" + rest if rest else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="one round of 1 s per format, to check the harness: nothing is written",
    )
    parser.add_argument(
        "--code",
        type=Path,
        help="run the cluster and the proxy on this checkout's code (e.g. a `git archive` of "
        "an older commit), to compare in one sitting: nothing is written",
    )
    args = parser.parse_args()
    rounds, phase_s = (1, 1.0) if args.quick else (ROUNDS, PHASE_S)
    python_path = code_path(args.code.resolve()) if args.code else ()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="yak-bench-schema-") as tmp:
        folder = Path(tmp)
        client_port, peer_port = free_ports(2)
        etcd = EmbeddedEtcd(folder / "etcd", client_port, peer_port, unsafe_no_fsync=True)
        etcd.start()
        try:
            with local_cluster(
                folder, etcd, f"bench{uuid.uuid4().hex[:8]}", brokers=1, python_path=python_path
            ) as cluster:
                registry = start_registry(cluster)
                proxy = psutil.Process(cluster.start_proxy(0, YAK_SCHEMA_REGISTRY_URL=registry).pid)
                if python_path:  # the launcher's first line says which code the proxy runs
                    log = cluster.folder / "logs" / "rest-proxy-0.log"
                    print(log.read_text().splitlines()[0])
                measured = asyncio.run(measure(cluster, proxy, rounds, phase_s))
        finally:
            etcd.stop()
    doc = document(measured, load_start)
    print(json.dumps({k: v for k, v in doc.items() if not isinstance(v, dict)}, indent=2))
    if args.quick or args.code:
        return
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    DOCS.write_text(replace_block(DOCS.read_text(), block(doc)))
    print(f"wrote {RESULTS} and {DOCS}")


if __name__ == "__main__":
    main()
