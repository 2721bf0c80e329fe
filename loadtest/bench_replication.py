"""Replication benchmark: RF 3 acks=all vs RF 1 acks=1 produce throughput, and failover time.
Run with ``python -m loadtest.bench_replication`` (``make bench-replication``).

One real cluster (etcd, a coordinator, 3 brokers with a 2 s lease; ``loadtest.local_cluster``)
serves both topics in the same run, so the ratio compares like with like:

- **throughput**: ``PRODUCERS`` (12) concurrent idempotent producers per topic, each on its own
  partition, send batches of 64 KiB (64 records of 1 KiB) for ``DURATION_S``; MB/s of
  acknowledged record bytes. ``rf3_vs_rf1_ratio`` = RF 3 acks=all ÷ RF 1 acks=1 (goal ≥ 0.5);
- **failover**: ``KILLS`` times, kill -9 the leader of a partition of an RF 3 topic, then
  produce to it in a loop (every attempt starts after the kill) until one is acknowledged;
  the time from the kill to that acknowledgement. p50 and max (goal ≤ twice the lease TTL);
  also from the lease expiry (the registration vanishing from etcd) to that acknowledgement.
  The killed broker is restarted and the ISR waited full before the next kill.

Results go to ``loadtest/results/replication.json``; every process is stopped at the end.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from loadtest.local_cluster import (
    IdempotentProducer,
    LocalCluster,
    RegistrationWatch,
    local_cluster,
    wait_for,
)
from yak.clients.admin import AdminClient
from yak.etcd_server import EmbeddedEtcd, free_ports

__all__ = ["main"]

RESULTS = Path(__file__).parent / "results" / "replication.json"
PRODUCERS = 12
DURATION_S = 5.0
KILLS = 10
RECORD_BYTES = 1024
RECORDS_PER_BATCH = 64


async def throughput(cluster: LocalCluster, admin: AdminClient, topic: str) -> float:
    """MB/s of acknowledged records, ``PRODUCERS`` producers on their own partitions."""
    producers = [
        IdempotentProducer(
            cluster,
            admin,
            topic,
            p,
            producer_id=hash((topic, p)) & 0x7FFF_FFFF,
            value_size=RECORD_BYTES,
            records_per_batch=RECORDS_PER_BATCH,
        )
        for p in range(PRODUCERS)
    ]
    for producer in producers:  # warm up: connections, leaders, first segment
        await producer.send_one()
    stop = asyncio.Event()
    before = sum(len(p.acks) for p in producers)
    started = time.perf_counter()
    tasks = [asyncio.create_task(p.run(stop)) for p in producers]
    await asyncio.sleep(DURATION_S)
    stop.set()
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    records = sum(len(p.acks) for p in producers) - before
    for producer in producers:
        await producer.aclose()
    return records * RECORD_BYTES / elapsed / 1e6


async def failovers(
    cluster: LocalCluster, admin: AdminClient, watch: RegistrationWatch, topic: str
) -> tuple[list[float], list[float]]:
    """Seconds from each kill, and from each lease expiry, to the next acknowledged write."""
    durations: list[float] = []
    from_expiry: list[float] = []
    for kill in range(KILLS):
        partition = kill % PRODUCERS
        described = await wait_for(admin, topic, "full-isr", timeout_s=60)
        victim = described.partitions[partition].leader
        producer = IdempotentProducer(cluster, admin, topic, partition, producer_id=90_000 + kill)
        await producer.send_one()  # connected to the leader, producer id known
        killed_at = time.monotonic()
        cluster.kill(victim)
        acked = len(producer.acks)
        while len(producer.acks) == acked:
            await producer.send_one()  # retries until a new leader acknowledges
        acked_at = producer.acks[acked].acked_at
        durations.append(acked_at - killed_at)
        expired_at = watch.expired_after(victim, killed_at)
        if expired_at is not None:
            from_expiry.append(acked_at - expired_at)
        await producer.aclose()
        await asyncio.to_thread(cluster.start_broker, victim)
    return durations, from_expiry


async def run(cluster: LocalCluster) -> dict[str, Any]:
    async with AdminClient(cluster.coordinator_url) as admin:
        await admin.create_topic("rf1", partitions=PRODUCERS, replication_factor=1)
        await admin.create_topic(
            "rf3",
            partitions=PRODUCERS,
            replication_factor=3,
            configs={"min.insync.replicas": "2"},
        )
        await wait_for(admin, "rf1", "led")
        await wait_for(admin, "rf3", "full-isr")
        rf1 = await throughput(cluster, admin, "rf1")
        rf3 = await throughput(cluster, admin, "rf3")
        async with RegistrationWatch(cluster) as watch:
            durations, from_expiry = await failovers(cluster, admin, watch, "rf3")
    return {
        "rf1_acks1_mb_s": rf1,
        "rf3_acksall_mb_s": rf3,
        "rf3_vs_rf1_ratio": rf3 / rf1,
        "failover_p50_s": statistics.median(durations),
        "failover_max_s": max(durations),
        "failovers_s": durations,
        "expiry_to_write_p50_s": statistics.median(from_expiry) if from_expiry else -1.0,
        "expiry_to_write_max_s": max(from_expiry, default=-1.0),
        "lease_ttl_s": cluster.lease_ttl_s,
    }


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


def report(results: dict[str, Any]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "benchmark": "replication",
        "producers": PRODUCERS,
        "duration_s": DURATION_S,
        "batch_bytes": RECORD_BYTES * RECORDS_PER_BATCH,
        **{key: _rounded(value) for key, value in results.items()},
    }
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")
    goal_s = 2 * results["lease_ttl_s"]
    table = Table("metric", "value", "goal", title="yak replication (3 brokers, same run)")
    table.add_row("RF 1 acks=1 produce (MB/s)", f"{results['rf1_acks1_mb_s']:.1f}", "")
    table.add_row("RF 3 acks=all produce (MB/s)", f"{results['rf3_acksall_mb_s']:.1f}", "")
    ratio = results["rf3_vs_rf1_ratio"]
    table.add_row("rf3_vs_rf1_ratio", f"{ratio:.2f}", f"{'ok' if ratio >= 0.5 else 'below'} ≥ 0.5")
    for key in ("failover_p50_s", "failover_max_s"):
        value = results[key]
        table.add_row(key, f"{value:.2f}", f"{'ok' if value <= goal_s else 'above'} ≤ {goal_s} s")
    for key in ("expiry_to_write_p50_s", "expiry_to_write_max_s"):
        table.add_row(key, f"{results[key]:.3f}", "lease expiry → new leader's first ack")
    Console().print(table)
    Console().print(f"written to {RESULTS}")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="yak-bench-replication-") as tmp:
        folder = Path(tmp)
        client_port, peer_port = free_ports(2)
        etcd = EmbeddedEtcd(folder / "etcd", client_port, peer_port, unsafe_no_fsync=True)
        etcd.start()
        try:
            with local_cluster(folder, etcd, f"bench{uuid.uuid4().hex[:8]}") as cluster:
                results = asyncio.run(run(cluster))
        finally:
            etcd.stop()
    report(results)


if __name__ == "__main__":
    main()
