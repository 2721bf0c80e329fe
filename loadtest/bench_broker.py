"""Broker data-plane benchmark: produce/fetch throughput beside a trivial ASGI endpoint, and
long-poll wake-up latency. Run with ``python -m loadtest.bench_broker``.

Starts real processes on free ports — etcd, one ``yak-broker``, and a trivial uvicorn app (a
raw ASGI handler that reads the body, or returns N prebuilt bytes) — and stands in for the
coordinator by writing one topic into etcd. Throughput is measured with the same httpx client,
body bytes and concurrency against both, so each ``*_ratio`` (broker MB/s ÷ trivial MB/s) says
how much of plain HTTP's capacity the broker keeps (goal >= 0.6). Batches hold 1 KiB records.
Wake-up latency: a fetch long-polls at the log end, a produce appends one small batch, and the
time from sending the produce to the fetch's answer is recorded (p50/p99; goal <= 5 ms; it
includes the produce request's own trip). Results go to ``loadtest/results/broker.json`` and a
rich table; every process is stopped at the end, also on errors. Takes well under 2 minutes.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from yak.etcd_server import EmbeddedEtcd, free_ports
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import PartitionState, TopicRecord
from yak.protocol.broker_wire import (
    FRAME_CONTENT_TYPE,
    FetchPartition,
    FetchRequest,
    ProducePartition,
    ProduceRequest,
    encode_fetch_request,
    encode_produce_request,
)
from yak.record import RecordInput, encode_batch
from yak.supervisor import ProcessSpec, Supervisor

__all__ = ["main", "trivial_app"]

RESULTS = Path(__file__).parent / "results" / "broker.json"
TOPIC = "bench"
SIZES = {"64kib": 64 * 1024, "1mib": 1024 * 1024}
DURATION_S = 3.0
CONCURRENCY = 2
WAKEUPS = 200
_BLOBS: dict[int, bytes] = {}

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def trivial_app(scope: Scope, receive: Receive, send: Send) -> None:
    """POST: read the whole body, answer 204. GET /?n=N: answer N bytes."""
    if scope["type"] != "http":
        return
    if scope["method"] == "POST":
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    size = int(scope["query_string"].decode().partition("=")[2] or 0)
    blob = _BLOBS.get(size) or _BLOBS.setdefault(size, os.urandom(size))
    headers = [(b"content-length", str(size).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": blob})


def records_batch(total: int) -> bytes:
    """One batch of 1 KiB records adding up to about ``total`` bytes."""
    value = os.urandom(1000)
    count = max(total // 1024, 1)
    return encode_batch([RecordInput(value=value, timestamp=0) for _ in range(count)])


async def throughput(call: Callable[[], Awaitable[int]]) -> float:
    """MB/s of ``call`` (returns bytes moved) run by CONCURRENCY workers for DURATION_S."""
    moved = 0
    deadline = time.perf_counter() + DURATION_S

    async def worker() -> None:
        nonlocal moved
        while time.perf_counter() < deadline:
            moved += await call()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return moved / (time.perf_counter() - started) / 1e6


async def measure(http: httpx.AsyncClient, broker: str, trivial: str) -> dict[str, float]:
    results: dict[str, float] = {}
    frame = {"content-type": FRAME_CONTENT_TYPE}
    for name, size in SIZES.items():
        batch = records_batch(size)
        body = encode_produce_request(ProduceRequest((ProducePartition(TOPIC, 0, batch),)))

        async def produce(body: bytes = body, n: int = len(batch)) -> int:
            response = await http.post(f"{broker}/v1/produce", content=body, headers=frame)
            response.raise_for_status()
            return n

        async def post(body: bytes = body, n: int = len(batch)) -> int:
            (await http.post(trivial, content=body)).raise_for_status()
            return n

        results[f"produce_{name}_mb_s"] = await throughput(produce)
        results[f"produce_{name}_trivial_mb_s"] = await throughput(post)
        results[f"produce_{name}_ratio"] = (
            results[f"produce_{name}_mb_s"] / results[f"produce_{name}_trivial_mb_s"]
        )
    end = await log_end(http, broker)
    for name, size in SIZES.items():
        counter = itertools.count()

        async def fetch(size: int = size, offsets: Iterator[int] = counter) -> int:
            offset = (next(offsets) * (size // 1024)) % max(end - size // 1024, 1)
            request = FetchRequest((FetchPartition(TOPIC, 0, offset, size),), 0, 1, size)
            response = await http.post(f"{broker}/v1/fetch", content=encode_fetch_request(request))
            response.raise_for_status()
            return len(response.content)

        async def get(size: int = size) -> int:
            response = await http.get(trivial, params={"n": size})
            response.raise_for_status()
            return len(response.content)

        results[f"fetch_{name}_mb_s"] = await throughput(fetch)
        results[f"fetch_{name}_trivial_mb_s"] = await throughput(get)
        results[f"fetch_{name}_ratio"] = (
            results[f"fetch_{name}_mb_s"] / results[f"fetch_{name}_trivial_mb_s"]
        )
    return results


async def log_end(http: httpx.AsyncClient, broker: str) -> int:
    params = {"partition": f"{TOPIC}:0", "timestamp": "latest"}
    response = await http.get(f"{broker}/v1/offsets", params=params)
    return int(response.json()["partitions"][0]["offset"])


async def wakeups(http: httpx.AsyncClient, broker: str) -> dict[str, float]:
    """Latency from sending a produce to the answer of a fetch waiting at the log end."""
    small = encode_produce_request(
        ProduceRequest((ProducePartition(TOPIC, 0, records_batch(1024)),))
    )
    latencies = []
    for _ in range(WAKEUPS):
        offset = await log_end(http, broker)
        request = FetchRequest((FetchPartition(TOPIC, 0, offset),), max_wait_ms=5_000)
        fetch = asyncio.create_task(
            http.post(f"{broker}/v1/fetch", content=encode_fetch_request(request))
        )
        await asyncio.sleep(0.01)  # let the fetch reach the broker and park
        started = time.perf_counter()
        await http.post(f"{broker}/v1/produce", content=small)
        response = await fetch
        latencies.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.text
        assert len(response.content) > 100
    latencies.sort()
    return {
        "wakeup_p50_ms": statistics.median(latencies),
        "wakeup_p99_ms": latencies[int(len(latencies) * 0.99) - 1],
    }


async def create_topic(etcd_url: str, cluster_id: str) -> None:
    """Stand in for the coordinator: one partition led by broker 0."""
    keys = Keyspace(cluster_id)
    store = EtcdMetadataStore.from_url(etcd_url)
    try:
        record = TopicRecord(
            name=TOPIC,
            topic_id=uuid.uuid4().hex,
            partitions=1,
            replication_factor=1,
            configs={"segment.bytes": str(256 * 1024 * 1024)},
            created_at_ms=0,
        )
        await store.put(keys.topic(TOPIC), record.encode())
        state = PartitionState(topic=TOPIC, partition=0, leader=0, replicas=(0,), isr=(0,))
        await store.put(keys.partition(TOPIC, 0), state.encode())
    finally:
        await store.aclose()


async def wait_hosted(http: httpx.AsyncClient, broker: str) -> None:
    for _ in range(200):
        hosted = (await http.get(f"{broker}/v1/partitions")).json()["partitions"]
        if hosted:
            return
        await asyncio.sleep(0.05)
    raise RuntimeError("the broker never hosted the bench topic")


async def run(broker: str, trivial: str, etcd_url: str, cluster_id: str) -> dict[str, float]:
    await create_topic(etcd_url, cluster_id)
    limits = httpx.Limits(max_connections=CONCURRENCY + 2)
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:
        await wait_hosted(http, broker)
        results = await measure(http, broker, trivial)
        results.update(await wakeups(http, broker))
    return results


def start_processes(
    work: Path, supervisor: Supervisor, etcd_url: str, cluster_id: str
) -> tuple[str, str]:
    broker_port, trivial_port = free_ports(2)
    bin_dir = Path(sys.executable).parent
    supervisor.start(
        ProcessSpec(
            name="broker",
            argv=(str(bin_dir / "yak-broker"), "--port", str(broker_port)),
            log_path=work / "broker.log",
            health_url=f"http://127.0.0.1:{broker_port}/readyz",
            env={
                "YAK_ETCD": etcd_url,
                "YAK_CLUSTER_ID": cluster_id,
                "YAK_NODE_ID": "0",
                "YAK_DATA_DIR": str(work / "broker-0"),
                "YAK_LOG_LEVEL": "warning",
            },
        )
    )
    supervisor.start(
        ProcessSpec(
            name="trivial",
            argv=(
                sys.executable,
                "-m",
                "uvicorn",
                "loadtest.bench_broker:trivial_app",
                "--port",
                str(trivial_port),
                "--log-level",
                "warning",
                "--no-access-log",
            ),
            log_path=work / "trivial.log",
            health_url=f"http://127.0.0.1:{trivial_port}/?n=1",
            env={"PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        )
    )
    return f"http://127.0.0.1:{broker_port}", f"http://127.0.0.1:{trivial_port}/"


def report(results: dict[str, float]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "benchmark": "broker",
        "concurrency": CONCURRENCY,
        "duration_s": DURATION_S,
        **{k: round(v, 3) for k, v in results.items()},
    }
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")
    table = Table("metric", "broker", "trivial", "ratio / goal", title="yak broker data plane")
    for kind in ("produce", "fetch"):
        for name in SIZES:
            ratio = results[f"{kind}_{name}_ratio"]
            table.add_row(
                f"{kind} {name} (MB/s)",
                f"{results[f'{kind}_{name}_mb_s']:.0f}",
                f"{results[f'{kind}_{name}_trivial_mb_s']:.0f}",
                f"{ratio:.2f} {'ok' if ratio >= 0.6 else 'below'} (>= 0.6)",
            )
    for key in ("wakeup_p50_ms", "wakeup_p99_ms"):
        value = results[key]
        table.add_row(key, f"{value:.2f}", "", f"{'ok' if value <= 5 else 'above'} (<= 5 ms)")
    Console().print(table)
    Console().print(f"written to {RESULTS}")


def main() -> None:
    cluster_id = f"bench{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="yak-bench-broker-") as tmp:
        work = Path(tmp)
        client_port, peer_port = free_ports(2)
        etcd = EmbeddedEtcd(work / "etcd", client_port, peer_port, unsafe_no_fsync=True)
        supervisor = Supervisor()
        try:
            etcd.start()
            broker, trivial = start_processes(work, supervisor, etcd.endpoint, cluster_id)
            results = asyncio.run(run(broker, trivial, etcd.endpoint, cluster_id))
        finally:
            supervisor.stop_all()
            etcd.stop()
    report(results)


if __name__ == "__main__":
    main()
