"""Kafka listener benchmark (issue 32, item 5): confluent-kafka through Yak's Kafka listeners
against Redis Streams, the idle produce latency of the listener, and how many Python Kafka
clients pass the compatibility matrix — in one run on one machine. ``python -m
loadtest.bench_kafka`` (``make bench-kafka``).

In order, one system running at a time:

1. **Redis** (``loadtest.peers.servers.redis_server``, as ``make bench-peers`` starts it: AOF,
   fsync every second): the peers harness's ``Runner`` with the ``redis`` driver on the
   headline workload ``1-topic-16-partitions-1kb`` (the maximum sustained produce rate of
   1 KiB records, pipelined XADD, the search of ``loadtest.peers.runner``) and on the backlog
   workload (``--backlog`` records, default 1,000,000, drained with XREADGROUP + XACK); then
   idle XADD one at a time (``loadtest.latency.measure.idle_redis``).
2. **Yak** (``loadtest.peers.servers.yak_server``: etcd, a coordinator, 3 brokers with Kafka
   listeners, a rest-proxy): the same two workloads with the ``yak-kafka`` driver
   (confluent-kafka, idempotent acks=all, linger 50 ms as tuned for throughput, batch.size 1
   MiB; topics RF 3, min.insync 2; a group consumer), then the idle one-record produce latency
   on the partition leader's Kafka listener (``kafka_bench.idle``): acks=1 and acks=all with a
   bare-socket Produce v9 client (the headline ``kafka_acks1_p50_ms``: it measures the broker,
   not a client's queues) and acks=1 with confluent-kafka flushing each record (for reference),
   back to back as the goal says, and acks=1 paced 2 ms apart (``kafka_acks1_paced_*``: adds
   idle cores' wake-up), on a topic of one partition, RF 3.
3. **The matrix**: pytest runs ``MATRIX_MODULES`` (each starts its own cluster) with a JUnit
   XML report; ``clients_passing`` is how many of confluent-kafka, kafka-python and aiokafka
   passed every test parametrised by them (``kafka_bench.calc``). ``--no-matrix`` skips it.

``produce_kafka_vs_redis`` and ``consume_kafka_vs_redis`` divide the Kafka driver's rates by
Redis's. The drain is timed as the peers comparison times it, from creating the consumer to
the last record, so the Kafka figure includes the group join (an empty group's first rebalance waits
``group.initial.rebalance.delay.ms``: 0 on the brokers ``yak up`` and the peers' ``yak_server``
start, as in Kafka's shipped server.properties; 3 s is the broker's default, as Kafka's);
``kafka_group_join_s``, ``kafka_consume_after_join_rps`` and
``consume_kafka_after_join_vs_redis`` give the rate once the member holds its partitions.

Results (each goal with its verdict, the settings, the machine and the load average) go to
``loadtest/results/kafka.json`` and, but for ``--quick``, the block of ``docs/benchmarks.md``
(``kafka_bench.markdown``). ``--quick`` (a tenth of the durations, a 100,000-record backlog,
fewer samples, no matrix unless ``--matrix``) checks the harness and writes
``kafka-quick.json``. Every process is stopped at the end, also on errors and SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console
from rich.table import Table

from loadtest.kafka_bench.calc import goal_verdicts, matrix_from_junit, ratio
from loadtest.kafka_bench.idle import PACED_GAP_S, bare_socket, confluent
from loadtest.kafka_bench.markdown import block, replace_block
from loadtest.latency.measure import IdleSettings, idle_redis
from loadtest.peers.drivers.base import Driver
from loadtest.peers.drivers.redis_streams import RedisStreamsDriver
from loadtest.peers.drivers.yak_kafka import (
    CONSUMER_SETTINGS,
    PRODUCER_SETTINGS,
    THROUGHPUT_LINGER_MS,
    YakKafkaDriver,
)
from loadtest.peers.drivers.yak_rest import wait_for_leaders
from loadtest.peers.report import CONSUME_WORKLOAD, PRODUCE_WORKLOAD
from loadtest.peers.runner import Runner
from loadtest.peers.servers import redis_server, server_versions, yak_server
from loadtest.peers.workload import Workload, bundled_workloads
from loadtest.queue.calc import summary_ms
from yak.sdk import AsyncAdmin

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "loadtest" / "results"
DOCS = ROOT / "docs" / "benchmarks.md"
MATRIX_MODULES = (
    "tests/integration/kafka_protocol/test_kafka_clients.py",
    "tests/integration/kafka_protocol/test_kafka_groups.py",
)
IDLE_TOPIC = "bench-kafka-idle"
console = Console()


def _workloads(scale: float, backlog: int) -> tuple[Workload, Workload]:
    found = bundled_workloads()
    produce = found[PRODUCE_WORKLOAD].scaled(scale)
    drain = dataclasses.replace(found[CONSUME_WORKLOAD], backlog_records=backlog)
    return produce, drain


async def _rates(
    driver: Driver, produce: Workload, drain: Workload, step_s: float
) -> dict[str, Any]:
    """The max-rate and backlog runs of one driver: its figures, prefixed by system."""
    try:
        top = await Runner(driver, produce, step_s=step_s).run()
        if isinstance(driver, YakKafkaDriver):
            driver.joins_s.clear()
        drained = await Runner(driver, drain).run()
    finally:
        await driver.aclose()
    system = "kafka" if driver.name == "yak-kafka" else driver.name
    extra: dict[str, Any] = {}
    if isinstance(driver, YakKafkaDriver) and driver.joins_s:
        join_s = max(driver.joins_s)
        reading_s = drained.drain_s - join_s
        extra = {
            "kafka_group_join_s": round(join_s, 2),
            "kafka_consume_after_join_rps": (
                round(drained.consumed / reading_s, 1) if reading_s > 0 else None
            ),
        }
    console.print(
        f"{driver.name:9} produce {top.publish_rate:>9,.0f}/s (sustained {top.sustained}) "
        f"drain {drained.consume_rate:>9,.0f}/s errors {top.errors + drained.errors}"
    )
    return {
        f"{system}_produce_rps": round(top.publish_rate, 1),
        f"{system}_produce_sustained": top.sustained,
        f"{system}_produce_e2e_p99_ms": round(top.e2e_latency.p99, 2),
        f"{system}_produce_errors": top.errors,
        f"{system}_produce_search": [dataclasses.asdict(step) for step in top.search],
        f"{system}_consume_rps": round(drained.consume_rate, 1),
        f"{system}_backlog_records": drained.consumed,
        f"{system}_drain_s": round(drained.drain_s, 2),
        f"{system}_consume_errors": drained.errors,
    } | extra


async def _phase(results: dict[str, Any], name: str, work: Awaitable[dict[str, Any]]) -> None:
    """Run one phase; a failure is written down (``<name>_error``) and the next phase runs."""
    try:
        results |= await work
    except Exception as exc:  # a benchmark reports what broke rather than losing the run
        results[f"{name}_error"] = f"{type(exc).__name__}: {exc}"
        console.print(f"[red]{name} failed:[/red] {exc!r}")


async def _redis(
    url: str, produce: Workload, drain: Workload, args: argparse.Namespace
) -> dict[str, Any]:
    results = await _rates(RedisStreamsDriver(url), produce, drain, args.step_s)
    row = await idle_redis(url, IdleSettings(samples=args.samples, warmup=args.warmup))
    return results | {"redis_xadd_p50_ms": row.p50, "redis_xadd_p99_ms": row.p99}


async def _leader_kafka_address(admin: AsyncAdmin, topic: str) -> str:
    """The Kafka listener of partition 0's leader, once ``topic`` has one."""
    deadline = time.monotonic() + 60
    while True:
        leader = (await admin.describe_topic(topic)).partitions[0].leader
        brokers = {b.broker_id: b.kafka for b in (await admin.cluster()).brokers}
        address = brokers.get(leader)
        if leader >= 0 and address:
            return address
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: no leader with a Kafka listener")
        await asyncio.sleep(0.2)  # another process's state: nothing local to wait on


async def _idle(url: str, args: argparse.Namespace) -> dict[str, Any]:
    """Idle one-record produce on the leader's Kafka listener (``kafka_bench.idle``)."""
    async with AsyncAdmin(url) as admin:
        await admin.create_topic(
            IDLE_TOPIC, partitions=1, replication_factor=3, configs={"min.insync.replicas": "2"}
        )
        await wait_for_leaders(admin, IDLE_TOPIC)
        address = await _leader_kafka_address(admin, IDLE_TOPIC)
    out: dict[str, Any] = {}
    runs = (
        ("acks1", bare_socket, 1, 0.0),
        ("acksall", bare_socket, -1, 0.0),
        ("acks1_confluent", confluent, 1, 0.0),
        ("acks1_paced", bare_socket, 1, PACED_GAP_S),
    )
    for name, probe, acks, gap_s in runs:
        seconds = await asyncio.to_thread(
            probe, address, IDLE_TOPIC, 0, acks, args.warmup, args.samples, gap_s
        )
        summary = summary_ms(seconds)
        out |= {f"kafka_{name}_{k}": v for k, v in summary.items()}
    return out


async def _yak(
    url: str, produce: Workload, drain: Workload, args: argparse.Namespace
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    await _phase(results, "kafka_rates", _rates(YakKafkaDriver(url), produce, drain, args.step_s))
    await _phase(results, "kafka_idle", _idle(url, args))
    return results


def _matrix(report: Path) -> dict[str, Any]:
    """Run the matrix modules under pytest; the figures of its JUnit report."""
    argv = [sys.executable, "-m", "pytest", *MATRIX_MODULES, "-q", "-p", "no:cacheprovider"]
    done = subprocess.run([*argv, f"--junitxml={report}"], cwd=ROOT, capture_output=True, text=True)
    console.print(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr)
    if not report.exists():
        raise RuntimeError(f"pytest wrote no report (exit {done.returncode}): {done.stderr[-500:]}")
    figures = matrix_from_junit(report.read_text()).figures()
    return figures | {"matrix_pytest_exit": done.returncode, "matrix_command": " ".join(argv[2:])}


def run(args: argparse.Namespace) -> dict[str, Any]:
    produce, drain = _workloads(args.scale, args.backlog)
    results: dict[str, Any] = {"load_average_start": os.getloadavg()}
    with redis_server() as redis_url:
        asyncio.run(_phase(results, "redis", _redis(redis_url, produce, drain, args)))
    with yak_server() as yak:
        results |= asyncio.run(_yak(yak.url, produce, drain, args))
    results["load_average_after_rates"] = os.getloadavg()
    if args.matrix:
        with tempfile.TemporaryDirectory(prefix="yak-bench-kafka-") as tmp:
            try:
                results |= _matrix(Path(tmp) / "matrix.xml")
            except Exception as exc:  # written down; the figures measured so far are kept
                results["matrix_error"] = f"{type(exc).__name__}: {exc}"
    results["produce_kafka_vs_redis"] = ratio(
        results.get("kafka_produce_rps"), results.get("redis_produce_rps")
    )
    results["consume_kafka_vs_redis"] = ratio(
        results.get("kafka_consume_rps"), results.get("redis_consume_rps")
    )
    results["consume_kafka_after_join_vs_redis"] = ratio(
        results.get("kafka_consume_after_join_rps"), results.get("redis_consume_rps")
    )
    results.setdefault("kafka_acks1_p50_ms", None)
    results["load_average_end"] = os.getloadavg()
    results["setup"] = {
        "produce_workload": produce.name,
        "consume_workload": drain.name,
        "backlog_records": drain.backlog_records,
        "scale": args.scale,
        "kafka_producer": PRODUCER_SETTINGS | {"linger.ms": THROUGHPUT_LINGER_MS},
        "kafka_consumer": CONSUMER_SETTINGS,
        "redis": RedisStreamsDriver.description,
        "kafka_acks1_method": "bare-socket Produce v9 (yak.protocol.kafka_wire), one request "
        "at a time on one connection to the leader, back to back (the next sent when the answer "
        "is read; acks1_paced: 2 ms apart), 1 KiB record, RF 3 topic of 1 partition",
        "group_initial_rebalance_delay_ms": 0,
        "idle_samples": args.samples,
        "idle_warmup": args.warmup,
        "versions": server_versions(),
    }
    return results


def report(results: dict[str, Any], *, docs: bool, out: Path) -> dict[str, Any]:
    """Write the JSON (goals and verdicts first), with ``docs`` the block of
    ``docs/benchmarks.md``, and print the table."""
    goals = goal_verdicts(results)
    document = {
        "benchmark": "kafka",
        "goals": goals,
        **results,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    if docs:
        DOCS.write_text(replace_block(DOCS.read_text(), block(document)))
    table = Table("figure", "value", "goal", "verdict", title="yak Kafka listener (issue 32)")
    for key, verdict in goals.items():
        shown = verdict["value"]
        table.add_row(key, f"{shown:,}" if shown is not None else "-", verdict["goal"],
                      "ok" if verdict["met"] else "missed")  # fmt: skip
    console.print(table)
    console.print(f"written to {out}")
    return document


def _exit_on_sigterm(signum: int, _frame: FrameType | None) -> None:
    """SIGTERM unwinds like Ctrl-C, so every ``with`` that started servers stops them."""
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="a small run: checks the harness")
    parser.add_argument("--backlog", type=int, help="records of the drain (default 1,000,000)")
    parser.add_argument("--samples", type=int, help="idle requests measured (default 2,000)")
    parser.add_argument(
        "--matrix", action=argparse.BooleanOptionalAction, help="run the matrix tests"
    )
    parser.add_argument("--out", type=Path, help="where the JSON goes")
    args = parser.parse_args()
    args.scale = 0.1 if args.quick else 1.0
    args.step_s = 2.0 if args.quick else 5.0
    args.backlog = args.backlog or (100_000 if args.quick else 1_000_000)
    args.samples = args.samples or (300 if args.quick else 2_000)
    args.warmup = max(args.samples // 10, 20)
    args.matrix = (not args.quick) if args.matrix is None else args.matrix
    out = args.out or RESULTS / ("kafka-quick.json" if args.quick else "kafka.json")
    results = run(args)
    report(results, docs=not args.quick and args.matrix, out=out)


if __name__ == "__main__":
    main()
