"""Throughput of the rest-proxy by worker count: ``yak-rest-proxy --workers N`` (issue 18).

Run with ``python -m loadtest.bench_workers`` (``make bench-workers``). One real cluster (etcd,
a coordinator, 3 brokers; ``loadtest.local_cluster``) holds one topic of 16 partitions, RF 3,
``min.insync.replicas`` 2. For each worker count (``--workers``, default 1 and 2) a proxy runs
with ``YAK_WORKERS=N``; ``--clients`` client *processes* (so that the load generator is not one
Python process's event loop) each keep ``--connections`` connections busy with
``POST /api/v1/topics/{t}/records?acks=all`` of 500 records of 1 KiB JSON, for ``--duration``
seconds after a warm-up; records acknowledged per second, the proxy's CPU (all its processes,
from ``/proc``) and the machine's load are recorded. Everything shares the machine's cores:
more workers help only where cores are free (``nproc`` is printed with the results).
Results go to ``loadtest/results/workers.json``; every process is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson

from loadtest.latency.measure import cpu_seconds
from loadtest.local_cluster import local_cluster, wait_for
from loadtest.peers.drivers.base import make_payload
from yak.clients.admin import AdminClient
from yak.etcd_server import EmbeddedEtcd, free_ports

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "loadtest" / "results" / "workers.json"
TOPIC = "workers"
RECORDS_PER_REQUEST = 500


def _body() -> bytes:
    values = [orjson.loads(make_payload(1024, time.monotonic_ns())) for _ in range(500)]
    return orjson.dumps({"records": [{"value": value} for value in values]})


async def _client(url: str, connections: int, warmup_s: float, duration_s: float) -> int:
    """Records acknowledged during the measured window by ``connections`` loops."""
    body = _body()
    loop = asyncio.get_running_loop()
    start = loop.time() + warmup_s
    end = start + duration_s
    limits = httpx.Limits(max_connections=connections)

    async def one(http: httpx.AsyncClient) -> int:
        counted = 0
        while (now := loop.time()) < end:
            answer = await http.post(
                f"/api/v1/topics/{TOPIC}/records",
                params={"acks": "all"},
                content=body,
                headers={"content-type": "application/json"},
            )
            if answer.status_code == 200 and now >= start:
                counted += RECORDS_PER_REQUEST
        return counted

    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
        return sum(await asyncio.gather(*(one(http) for _ in range(connections))))


def _proxy_pids(pid: int) -> list[int]:
    """The proxy's process and its workers."""
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children.extend(int(c) for c in (task / "children").read_text().split())
    return [pid, *children]


async def _measure(url: str, pid: int, args: argparse.Namespace) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "loadtest.bench_workers",
        "--client",
        url,
        "--connections",
        str(args.connections),
        "--warmup",
        str(args.warmup),
        "--duration",
        str(args.duration),
    ]
    clients = [
        await asyncio.create_subprocess_exec(*command, cwd=ROOT, stdout=asyncio.subprocess.PIPE)
        for _ in range(args.clients)
    ]
    await asyncio.sleep(args.warmup)
    pids = _proxy_pids(pid)
    cpu_before = sum(cpu_seconds(p) for p in pids)
    load_before = os.getloadavg()[0]
    outputs = [await client.communicate() for client in clients]
    cpu = sum(cpu_seconds(p) for p in pids) - cpu_before
    records = sum(int(out.strip() or 0) for out, _ in outputs)
    return {
        "records_per_s": round(records / args.duration),
        "proxy_cpu_cores": round(cpu / args.duration, 2),
        "proxy_cpu_us_per_record": round(cpu / records * 1e6, 2) if records else None,
        "load_at_start": round(load_before, 2),
    }


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"benchmark": "workers", "cpus": os.cpu_count(), "runs": {}}
    with tempfile.TemporaryDirectory(prefix="yak-bench-workers-") as tmp:
        folder = Path(tmp)
        client_port, peer_port = free_ports(2)
        etcd = EmbeddedEtcd(folder / "etcd", client_port, peer_port, unsafe_no_fsync=True)
        etcd.start()
        try:
            with local_cluster(folder, etcd, f"workers{uuid.uuid4().hex[:8]}") as cluster:
                async with AdminClient(cluster.coordinator_url) as admin:
                    await admin.create_topic(
                        TOPIC,
                        partitions=16,
                        replication_factor=3,
                        configs={"min.insync.replicas": "2"},
                    )
                    await wait_for(admin, TOPIC, "full-isr", timeout_s=60)
                for workers in args.workers:
                    process = cluster.start_proxy(workers, YAK_WORKERS=str(workers))
                    run = await _measure(cluster.proxy_url(workers), process.pid, args)
                    results["runs"][str(workers)] = run
                    print(f"workers {workers}: {json.dumps(run)}", flush=True)
                    process.popen.send_signal(signal.SIGTERM)  # the workers follow their parent
                    await asyncio.to_thread(process.popen.wait, 30)
                    cluster.proxies.pop(workers, None)
        finally:
            etcd.stop()
    return results


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--clients", type=int, default=2, help="client processes")
    parser.add_argument("--connections", type=int, default=8, help="connections per client")
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--client", help=argparse.SUPPRESS)  # run as one client process
    args = parser.parse_args(argv)
    args.workers = [int(w) for w in str(args.workers).split(",") if w]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    if args.client:
        print(asyncio.run(_client(args.client, args.connections, args.warmup, args.duration)))
        return 0
    results = asyncio.run(_run(args))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
