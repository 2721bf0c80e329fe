"""Console benchmark: how long each page takes with 100 topics x 16 partitions. Run with
``python -m loadtest.bench_console`` (``make bench-console``).

One real cluster (etcd, a coordinator, 3 brokers, a rest-proxy and the console, as processes;
``loadtest.local_cluster``) gets ``TOPICS`` topics of ``PARTITIONS`` partitions (replication
factor ``--replication-factor``, default 3), a few records in each partition and
``GROUPS`` consumer groups with committed offsets. Then each page is fetched ``ROUNDS`` times
one after another with ``httpx`` on 127.0.0.1 after a warm-up; the time is the client's
(request sent → whole body read): p50, p95 and max per page. The same loop against the
console's ``/healthz`` is the baseline (what a request costs before any page work).

Goal (issue 7): every page under 200 ms. Results go to ``loadtest/results/console.json``;
every process is stopped at the end, also on errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from loadtest.local_cluster import LocalCluster, local_cluster
from yak.etcd_server import EmbeddedEtcd, free_ports
from yak.sdk import AsyncAdmin, AsyncConsumer, AsyncProducer

__all__ = ["main"]

RESULTS = Path(__file__).parent / "results" / "console.json"
TOPICS = 100
PARTITIONS = 16
GROUPS = 5
RECORDS_PER_PARTITION = 5
WARMUP = 3
ROUNDS = 30
GOAL_MS = 200.0


async def populate(api: str, replication_factor: int) -> list[str]:
    """Topics with a few records per partition, and groups with committed offsets."""
    names = [f"bench-{i:03d}" for i in range(TOPICS)]
    async with AsyncAdmin(api, request_timeout_ms=120_000) as admin:
        limit = asyncio.Semaphore(8)

        async def create(name: str) -> None:
            async with limit:
                await admin.create_topic(
                    name, partitions=PARTITIONS, replication_factor=replication_factor
                )

        await asyncio.gather(*(create(n) for n in names))
    async with AsyncProducer(api, linger_ms=20) as producer:
        sent = [
            await producer.send(name, f'{{"n": {i}}}', key=f"k{i}", partition=p)
            for name in names
            for p in range(PARTITIONS)
            for i in range(RECORDS_PER_PARTITION)
        ]
        await asyncio.gather(*sent)
    for g in range(GROUPS):
        topics = names[g * 2 : g * 2 + 2]
        async with AsyncConsumer(
            api, f"bench-group-{g}", topics, auto_offset_reset="earliest"
        ) as consumer:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not await consumer.poll(timeout_ms=1000):
                pass
            await consumer.commit()
    return names


async def time_page(client: httpx.AsyncClient, path: str) -> dict[str, Any]:
    for _ in range(WARMUP):
        (await client.get(path)).raise_for_status()
    times = []
    size = 0
    for _ in range(ROUNDS):
        start = time.perf_counter()
        response = await client.get(path)
        times.append((time.perf_counter() - start) * 1000)
        response.raise_for_status()
        size = len(response.content)
    times.sort()
    return {
        "path": path,
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(times[int(len(times) * 0.95) - 1], 2),
        "max_ms": round(times[-1], 2),
        "bytes": size,
    }


async def run(cluster: LocalCluster, replication_factor: int) -> dict[str, Any]:
    api = cluster.proxy_url(0)
    started = time.monotonic()
    names = await populate(api, replication_factor)
    populated_s = time.monotonic() - started
    topic = names[0]
    pages = [
        "/healthz",
        "/",
        "/topics",
        "/topics?q=bench-05",
        f"/topics/{topic}",
        "/brokers",
        "/brokers/0",
        "/groups",
        "/groups/bench-group-0",
        f"/topics/{topic}/messages",
        f"/topics/{topic}/messages/results?partition=all&start=newest",
    ]
    async with httpx.AsyncClient(base_url=cluster.console_url, timeout=30) as client:
        # Let the console's sampler see the whole cluster before timing.
        await asyncio.sleep(3)
        timed = [await time_page(client, path) for path in pages]
    return {
        "topics": TOPICS,
        "partitions_per_topic": PARTITIONS,
        "replication_factor": replication_factor,
        "groups": GROUPS,
        "rounds": ROUNDS,
        "populate_s": round(populated_s, 1),
        "goal_ms": GOAL_MS,
        "pages": timed,
        "slowest_p95_ms": max(t["p95_ms"] for t in timed),
        "all_under_goal": all(t["p95_ms"] < GOAL_MS for t in timed),
    }


def report(results: dict[str, Any]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    table = Table(
        title=f"console pages, {results['topics']} topics x {results['partitions_per_topic']} "
        f"partitions, RF {results['replication_factor']} (goal < {GOAL_MS:.0f} ms)"
    )
    for column in ("page", "p50 ms", "p95 ms", "max ms", "KiB"):
        table.add_column(column, justify="left" if column == "page" else "right")
    for page in results["pages"]:
        table.add_row(
            page["path"],
            f"{page['p50_ms']:.1f}",
            f"{page['p95_ms']:.1f}",
            f"{page['max_ms']:.1f}",
            f"{page['bytes'] / 1024:.0f}",
        )
    Console().print(table)
    print(f"written to {RESULTS}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0] if __doc__ else "")
    parser.add_argument("--replication-factor", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="yak-bench-console-") as tmp:
        folder = Path(tmp)
        client_port, peer_port = free_ports(2)
        etcd = EmbeddedEtcd(folder / "etcd", client_port, peer_port, unsafe_no_fsync=True)
        etcd.start()
        try:
            with local_cluster(folder, etcd, f"bench{uuid.uuid4().hex[:8]}") as cluster:
                cluster.start_proxy(0)
                cluster.start_console(0)
                results = asyncio.run(run(cluster, args.replication_factor))
        finally:
            etcd.stop()
    report(results)


if __name__ == "__main__":
    main()
