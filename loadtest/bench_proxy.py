"""REST-proxy benchmark: Confluent v2 JSON produce and consume through one proxy, end-to-end
latency, and a trivial ASGI endpoint as the baseline. Run with ``python -m loadtest.bench_proxy``
(``make bench-proxy``); ``--profile DIR`` also samples the proxy with py-spy during the measured
windows (collapsed stacks in ``DIR``; the figures of such a run are perturbed by the sampler).

One real cluster (etcd, a coordinator, 3 brokers; ``loadtest.local_cluster``) holds one topic of
16 partitions with replication factor 3 (``min.insync.replicas`` 2). Two rest-proxies run on it,
identical but for ``YAK_ACKS`` (1 and -1), and only one is loaded at a time. Records are 1 KiB
JSON values; ``httpx`` clients in this process, everything on 127.0.0.1:

- **produce**: ``CLIENTS`` (8) tasks each send ``POST /topics/{t}`` with 500 records
  (``application/vnd.kafka.json.v2+json``) back to back: ``WARMUP_S`` of warm-up, then records/s
  acknowledged without an error over ``DURATION_S``, once per proxy. The same loop against a
  trivial uvicorn app that parses the body with orjson and answers a same-shaped ``offsets``
  list is the baseline, so ``*_vs_trivial`` is the share of plain HTTP + JSON the proxy keeps;
- **consume**: one consumer instance (``auto.offset.reset`` earliest) assigned all 16 partitions
  drains what was produced with ``GET .../records`` (large ``max_bytes``), one request at a
  time, for at most ``CONSUME_MAX_S``; records/s;
- **end-to-end latency**: 10 records every 10 ms (1,000 records/s) through the acks=all proxy,
  each value carrying its send time, and a consumer long-polling (``timeout=1000``) computes
  receipt - send per record; p50/p99/p99.9 after ``E2E_WARMUP_S``, and the produce answer time.
  Sends keep to the schedule whatever the answers; at most ``E2E_MAX_IN_FLIGHT`` are pending
  (a tick beyond that is skipped and counted).

Every request gives up after ``REQUEST_TIMEOUT_S``: failed requests, records answered with an
error and records acknowledged but never consumed are counted, written and printed, not fatal.

Goals: produce ≥ 50,000 records/s, consume ≥ 50,000 records/s, e2e p99 ≤ 20 ms. Results go to
``loadtest/results/proxy.json``; every process is stopped at the end, also on errors.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
from rich.console import Console
from rich.table import Table

from loadtest.local_cluster import LocalCluster, local_cluster, wait_for
from yak.clients.admin import AdminClient
from yak.etcd_server import EmbeddedEtcd, free_ports
from yak.supervisor import ProcessSpec

__all__ = ["main", "trivial_app"]

RESULTS = Path(__file__).parent / "results" / "proxy.json"
TOPIC = "bench"
PARTITIONS = 16
VALUE_BYTES = 1024
RECORDS_PER_REQUEST = 500
CLIENTS = 8
WARMUP_S = 2.0
DURATION_S = 10.0
CONSUME_MAX_S = 30.0
CONSUME_MAX_BYTES = 16 * 1024 * 1024
E2E_INTERVAL_S = 0.010
E2E_RECORDS_PER_REQUEST = 10
E2E_WARMUP_S = 1.0
E2E_DURATION_S = 10.0
E2E_POLL_MS = 1_000
E2E_GRACE_S = 5.0
E2E_MAX_IN_FLIGHT = 48
REQUEST_TIMEOUT_S = 15.0
FAILURE_PAUSE_S = 0.1
PRODUCE_GOAL = 50_000
CONSUME_GOAL = 50_000
E2E_P99_GOAL_MS = 20.0
JSON_V2 = "application/vnd.kafka.json.v2+json"
PRODUCE_HEADERS = {"content-type": JSON_V2, "accept": "application/vnd.kafka.v2+json"}

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def trivial_app(scope: Scope, receive: Receive, send: Send) -> None:
    """POST: parse the JSON body, answer one ``offsets`` entry per record. GET: 200, empty."""
    if scope["type"] != "http":
        return
    answer = b""
    if scope["method"] == "POST":
        chunks = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        records = orjson.loads(b"".join(chunks))["records"]
        offsets = [
            {"partition": 0, "offset": i, "error_code": None, "error": None}
            for i in range(len(records))
        ]
        answer = orjson.dumps({"offsets": offsets, "key_schema_id": None, "value_schema_id": None})
    headers = [(b"content-type", JSON_V2.encode()), (b"content-length", str(len(answer)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": answer})


def record_value(index: int, sent: float = 0.0) -> dict[str, Any]:
    """A JSON value of about ``VALUE_BYTES`` bytes, carrying its index and send time."""
    stem = len(orjson.dumps({"id": index, "sent": sent, "pad": ""}))
    return {"id": index, "sent": sent, "pad": "x" * max(VALUE_BYTES - stem, 0)}


def produce_body(count: int, sent: float = 0.0) -> bytes:
    return orjson.dumps({"records": [{"value": record_value(i, sent)} for i in range(count)]})


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list; -1 if it is empty."""
    if not ordered:
        return -1.0
    return ordered[min(len(ordered) - 1, max(math.ceil(q * len(ordered)) - 1, 0))]


@contextlib.asynccontextmanager
async def profiled(pid: int, out: Path | None, duration_s: float) -> AsyncIterator[None]:
    """Sample ``pid`` with py-spy (collapsed stacks to ``out``) while the block runs."""
    if out is None:
        yield
        return
    argv = (
        str(Path(sys.executable).with_name("py-spy")),
        *("record", "--pid", str(pid), "--duration", str(math.ceil(duration_s))),
        *("--rate", "200", "--nonblocking", "--format", "raw", "--output", str(out)),
    )
    spy = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    try:
        yield
    finally:
        if await spy.wait() != 0:
            Console(stderr=True).print(f"py-spy could not sample pid {pid}; no {out}")


@dataclass
class Produced:
    """Records acknowledged without an error (all, and inside the window), records answered
    with an error, and requests that failed whole (a timeout, an HTTP error)."""

    total: int = 0
    in_window: int = 0
    errors: int = 0
    failed_requests: int = 0


async def produce_loop(
    http: httpx.AsyncClient,
    url: str,
    body: bytes,
    duration_s: float,
    tally: Produced,
    *,
    measured: bool,
) -> None:
    """``CLIENTS`` tasks posting ``body`` back to back; with ``measured``, the records of
    answers that arrive before the end count in the window."""
    end = time.perf_counter() + duration_s

    async def client() -> None:
        while time.perf_counter() < end:
            try:
                response = await http.post(url, content=body, headers=PRODUCE_HEADERS)
                response.raise_for_status()
            except httpx.HTTPError:
                tally.failed_requests += 1
                continue
            offsets = orjson.loads(response.content)["offsets"]
            ok = sum(1 for entry in offsets if entry["error_code"] is None)
            tally.total += ok
            tally.errors += len(offsets) - ok
            if measured and time.perf_counter() <= end:
                tally.in_window += ok

    await asyncio.gather(*(client() for _ in range(CLIENTS)))


async def produce_rate(
    http: httpx.AsyncClient, url: str, pid: int, profile: Path | None
) -> Produced:
    body = produce_body(RECORDS_PER_REQUEST)
    tally = Produced()
    await produce_loop(http, url, body, WARMUP_S, tally, measured=False)
    async with profiled(pid, profile, DURATION_S):
        await produce_loop(http, url, body, DURATION_S, tally, measured=True)
    return tally


async def consumer_instance(http: httpx.AsyncClient, proxy: str, group: str, reset: str) -> str:
    """A new json consumer instance in ``group`` assigned every partition; its base URI."""
    name = f"bench-{uuid.uuid4().hex[:8]}"
    create = {"name": name, "format": "json", "auto.offset.reset": reset}
    response = await http.post(
        f"{proxy}/consumers/{group}",
        content=orjson.dumps(create),
        headers={"content-type": "application/vnd.kafka.v2+json"},
    )
    response.raise_for_status()
    base_uri = str(response.json()["base_uri"])
    partitions = [{"topic": TOPIC, "partition": p} for p in range(PARTITIONS)]
    response = await http.post(
        f"{base_uri}/assignments",
        content=orjson.dumps({"partitions": partitions}),
        headers={"content-type": "application/vnd.kafka.v2+json"},
    )
    response.raise_for_status()
    return base_uri


async def poll(http: httpx.AsyncClient, base_uri: str, timeout_ms: int) -> list[Any] | None:
    """One records GET; None if it failed (a timeout, an HTTP error)."""
    try:
        response = await http.get(
            f"{base_uri}/records",
            params={"timeout": timeout_ms, "max_bytes": CONSUME_MAX_BYTES},
            headers={"accept": JSON_V2},
        )
        response.raise_for_status()
    except httpx.HTTPError:
        return None
    records: list[Any] = orjson.loads(response.content)
    return records


@dataclass
class Consumed:
    """Records/s of the drain, records read, and records GETs that failed."""

    rps: float = 0.0
    count: int = 0
    failed_requests: int = 0


async def consume_rate(
    http: httpx.AsyncClient, proxy: str, expected: int, pid: int, profile: Path | None
) -> Consumed:
    """Drain ``expected`` records from the start, one GET at a time."""
    base_uri = await consumer_instance(http, proxy, "bench-consume", "earliest")
    result = Consumed()
    started = time.perf_counter()
    deadline = started + CONSUME_MAX_S
    async with profiled(pid, profile, DURATION_S):
        while result.count < expected and time.perf_counter() < deadline:
            records = await poll(http, base_uri, E2E_POLL_MS)
            if records is None:
                result.failed_requests += 1
                await asyncio.sleep(FAILURE_PAUSE_S)
                continue
            result.count += len(records)
    result.rps = result.count / (time.perf_counter() - started)
    await http.delete(base_uri)
    return result


@dataclass
class Latencies:
    """End-to-end and produce-answer times (ms, ascending), failed or skipped requests, and
    records acknowledged but never received."""

    e2e: list[float] = field(default_factory=list)
    acks: list[float] = field(default_factory=list)
    failed_produces: int = 0
    skipped_sends: int = 0
    failed_polls: int = 0
    missing: int = 0


async def e2e_latency(http: httpx.AsyncClient, proxy: str) -> Latencies:
    """Milliseconds from sending each record to a long-polling consumer receiving it, and from
    sending each produce request to its answer."""
    base_uri = await consumer_instance(http, proxy, "bench-e2e", "latest")
    await poll(http, base_uri, 0)  # positions at the log end before anything is sent
    result = Latencies()
    received = 0
    delivered = 0
    sending = True
    measure_from = time.perf_counter() + E2E_WARMUP_S
    done = asyncio.Event()

    async def consume() -> None:
        nonlocal received
        while not done.is_set() and (sending or received < delivered):
            records = await poll(http, base_uri, E2E_POLL_MS)
            now = time.perf_counter()
            if records is None:
                result.failed_polls += 1
                await asyncio.sleep(FAILURE_PAUSE_S)
                continue
            received += len(records)
            for record in records:
                sent = float(record["value"]["sent"])
                if sent >= measure_from:
                    result.e2e.append((now - sent) * 1000)

    async def send_one() -> None:
        nonlocal delivered
        sent = time.perf_counter()
        body = produce_body(E2E_RECORDS_PER_REQUEST, sent)
        try:
            response = await http.post(
                f"{proxy}/topics/{TOPIC}", content=body, headers=PRODUCE_HEADERS
            )
            response.raise_for_status()
        except httpx.HTTPError:
            result.failed_produces += 1
            return
        offsets = orjson.loads(response.content)["offsets"]
        delivered += sum(1 for entry in offsets if entry["error_code"] is None)
        if sent >= measure_from:
            result.acks.append((time.perf_counter() - sent) * 1000)

    consumer = asyncio.create_task(consume())
    sends: set[asyncio.Task[None]] = set()
    started = time.perf_counter()
    ticks = round((E2E_WARMUP_S + E2E_DURATION_S) / E2E_INTERVAL_S)
    for tick in range(ticks):  # a fixed schedule: a slow answer does not delay the next send
        await asyncio.sleep(max(0.0, started + tick * E2E_INTERVAL_S - time.perf_counter()))
        if len(sends) >= E2E_MAX_IN_FLIGHT:  # answers stalled: do not pile up more
            result.skipped_sends += 1
            continue
        task = asyncio.create_task(send_one())
        sends.add(task)
        task.add_done_callback(sends.discard)
    await asyncio.gather(*sends)
    sending = False
    with contextlib.suppress(TimeoutError):  # until every acknowledged record is received
        await asyncio.wait_for(asyncio.shield(consumer), E2E_GRACE_S)
    done.set()
    await consumer
    await http.delete(base_uri)
    result.missing = max(delivered - received, 0)
    result.e2e.sort()
    result.acks.sort()
    return result


def start_trivial(cluster: LocalCluster) -> str:
    (port,) = free_ports(1)
    url = f"http://127.0.0.1:{port}"
    argv = (sys.executable, "-m", "uvicorn", "loadtest.bench_proxy:trivial_app")
    cluster.supervisor.start(
        ProcessSpec(
            name="trivial",
            argv=(*argv, "--port", str(port), "--log-level", "warning", "--no-access-log"),
            log_path=cluster.folder / "logs" / "trivial.log",
            health_url=f"{url}/",
            env={"PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        )
    )
    return url


async def run(cluster: LocalCluster, profile: Path | None) -> dict[str, Any]:
    async with AdminClient(cluster.coordinator_url) as admin:
        await admin.create_topic(
            TOPIC,
            partitions=PARTITIONS,
            replication_factor=3,
            configs={"min.insync.replicas": "2"},
        )
        await wait_for(admin, TOPIC, "full-isr", timeout_s=60)
    trivial = await asyncio.to_thread(start_trivial, cluster)
    acks1 = await asyncio.to_thread(cluster.start_proxy, 0, YAK_ACKS="1")
    acksall = await asyncio.to_thread(cluster.start_proxy, 1, YAK_ACKS="-1")

    def out(name: str) -> Path | None:
        return None if profile is None else profile / f"{name}.txt"

    limits = httpx.Limits(max_connections=CLIENTS + E2E_MAX_IN_FLIGHT + 4)
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S, limits=limits) as http:
        baseline = await produce_rate(http, trivial, 0, None)
        produced = {}
        for name, proxy in (("acks1", acks1), ("acksall", acksall)):
            assert proxy.spec.url is not None
            url = f"{proxy.spec.url}/topics/{TOPIC}"
            produced[name] = await produce_rate(http, url, proxy.pid, out(f"produce_{name}"))
        total = sum(p.total for p in produced.values())
        assert acksall.spec.url is not None
        consumed = await consume_rate(http, acksall.spec.url, total, acksall.pid, out("consume"))
        latencies = await e2e_latency(http, acksall.spec.url)
    trivial_rps = baseline.in_window / DURATION_S
    results: dict[str, Any] = {"trivial_produce_rps": trivial_rps}
    for name, tally in produced.items():
        rps = tally.in_window / DURATION_S
        results[f"produce_{name}_rps"] = rps
        results[f"produce_{name}_vs_trivial"] = rps / trivial_rps
        results[f"produce_{name}_record_errors"] = tally.errors
        results[f"produce_{name}_failed_requests"] = tally.failed_requests
    e2e, acks = latencies.e2e, latencies.acks
    results.update(
        {
            "records_produced": total,
            "consume_rps": consumed.rps,
            "records_consumed": consumed.count,
            "consume_failed_requests": consumed.failed_requests,
            "e2e_p50_ms": percentile(e2e, 0.5),
            "e2e_p99_ms": percentile(e2e, 0.99),
            "e2e_p999_ms": percentile(e2e, 0.999),
            "e2e_max_ms": e2e[-1] if e2e else -1.0,
            "e2e_samples": len(latencies.e2e),
            "e2e_produce_ack_p50_ms": percentile(acks, 0.5),
            "e2e_produce_ack_p99_ms": percentile(acks, 0.99),
            "e2e_failed_produce_requests": latencies.failed_produces,
            "e2e_skipped_produce_requests": latencies.skipped_sends,
            "e2e_failed_polls": latencies.failed_polls,
            "e2e_records_missing": latencies.missing,
        }
    )
    return results


def report(results: dict[str, Any]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "benchmark": "proxy",
        "brokers": 3,
        "replication_factor": 3,
        "partitions": PARTITIONS,
        "clients": CLIENTS,
        "records_per_request": RECORDS_PER_REQUEST,
        "value_bytes": VALUE_BYTES,
        "duration_s": DURATION_S,
        "e2e_records_per_s": round(E2E_RECORDS_PER_REQUEST / E2E_INTERVAL_S),
        **{k: round(v, 3) if isinstance(v, float) else v for k, v in results.items()},
    }
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")

    def verdict(ok: bool) -> str:
        return "ok" if ok else "missed"

    trivial = results["trivial_produce_rps"]
    table = Table("metric", "proxy", "trivial", "ratio", "goal", title="yak rest-proxy, v2 json")
    for name, label in (("acks1", "acks=1"), ("acksall", "acks=all")):
        rps = results[f"produce_{name}_rps"]
        table.add_row(
            f"produce {label} rec/s",
            f"{rps:,.0f}",
            f"{trivial:,.0f}",
            f"{results[f'produce_{name}_vs_trivial']:.2f}",
            f"{verdict(rps >= PRODUCE_GOAL)} ≥ {PRODUCE_GOAL:,}",
        )
    consume = results["consume_rps"]
    goal = f"{verdict(consume >= CONSUME_GOAL)} ≥ {CONSUME_GOAL:,}"
    table.add_row("consume rec/s", f"{consume:,.0f}", "", "", goal)
    for key, label in (("e2e_p50_ms", "p50"), ("e2e_p99_ms", "p99"), ("e2e_p999_ms", "p99.9")):
        value = results[key]
        goal = ""
        if key == "e2e_p99_ms":
            goal = f"{verdict(0 <= value <= E2E_P99_GOAL_MS)} ≤ {E2E_P99_GOAL_MS:.0f} ms"
        table.add_row(f"e2e {label} ms", f"{value:.1f}", "", "", goal)
    for key, label in (("e2e_produce_ack_p50_ms", "p50"), ("e2e_produce_ack_p99_ms", "p99")):
        table.add_row(f"e2e POST answer {label} ms", f"{results[key]:.1f}", "", "", "")
    Console().print(table)
    words = ("failed", "skipped", "missing", "errors")
    shown = ", ".join(
        f"{key} {value}" for key, value in results.items() if value and any(w in key for w in words)
    )
    Console().print(f"failures: {shown or 'none'}")
    Console().print(
        f"{results['records_produced']:,} records produced, {results['records_consumed']:,} "
        f"consumed, {results['e2e_samples']:,} latency samples; written to {RESULTS}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0] if __doc__ else "")
    parser.add_argument(
        "--profile", type=Path, help="also sample the proxy with py-spy into this folder"
    )
    args = parser.parse_args()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="yak-bench-proxy-") as tmp:
        folder = Path(tmp)
        client_port, peer_port = free_ports(2)
        etcd = EmbeddedEtcd(folder / "etcd", client_port, peer_port, unsafe_no_fsync=True)
        etcd.start()
        try:
            with local_cluster(folder, etcd, f"bench{uuid.uuid4().hex[:8]}") as cluster:
                results = asyncio.run(run(cluster, args.profile))
        finally:
            etcd.stop()
    report(results)


if __name__ == "__main__":
    main()
