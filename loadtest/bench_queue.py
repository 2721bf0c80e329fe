"""Queue benchmark (issue 30, item 6): share groups, delayed delivery and filters against their
goals, in one run on one cluster. ``python -m loadtest.bench_queue`` (``make bench-queue``);
``--profile DIR`` also samples the proxy and the brokers with py-spy during the share window
(raw collapsed stacks in ``DIR``; that run's figures are perturbed by the sampler).

One cluster (etcd, a coordinator, 3 brokers, one rest-proxy; ``loadtest.local_cluster``, all on
127.0.0.1), and in order (``loadtest.queue``):

1. **share_ack_rps** — a topic of ``PARTITIONS`` partitions, RF 3 (``min.insync.replicas`` 2),
   prefilled with 1 KiB JSON records straight to the leaders; a share group (``earliest``);
   ``CONSUMERS`` raw-``httpx`` members loop acquire (500) + accept-all through the proxy:
   records/s accepted over ``WINDOW_S`` after ``WARMUP_S``; p50/p99 of each request kind.
2. **group_poll_rps** — a consumer group of ``CONSUMERS`` members drains the same records with
   the native long poll (1 MiB, values as JSON, a commit a second) after ``GROUP_WARMUP_S``,
   over the same window, closed at the last record when the drain ends first (it does: it is
   several times faster);
   **share_vs_group_ratio** = share_ack_rps / group_poll_rps.
3. **delay_lateness_p99_ms** (p50, max, early count) — a topic with delays, ``DELAY_RATE``
   records/s for ``DELAY_S`` s through the proxy, each ``deliver_after_ms`` 2-5 s, acquired and
   accepted by ``DELAY_CONSUMERS`` share members (their accepts as ``--share-ack`` says); lateness
   against the ``yak-deliver-at`` header.
4. **delay_pending_1m_rss_mb** — the brokers' RSS growth for 1,000,000 records due in 1-2 days
   to a topic with delays (every replica's index caught up), minus the growth for the same
   records to a topic without delays (``queue.delays.pending_rss``).
5. **filter_cost_ratio** — ``bench_filter_proxy.measure`` on this cluster (its own proxy and
   RF 1 topic): proxy CPU per record scanned of each 1-in-10 filter over the unfiltered read;
   the figure is the worst of the filters (best rounds).

``--share-ack piggyback|separate``: the share members' accepts (phases 1 and 3) ride the next
acquire (the default, as Kafka's share consumers and the SDK send them) or go as requests of
their own (the mode is written down as ``share_ack_mode`` and ``delay_ack_mode``).
``--phases throughput`` runs only phases 1-2 (a partial run writes no docs block);
``--out PATH`` writes the JSON elsewhere.

Results (each goal with its verdict, the machine, the load average) go to
``loadtest/results/queue.json`` and, but for ``--quick``, the block of ``docs/benchmarks.md``
(``queue.markdown``); every process is stopped at the end, also on errors.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
from rich.console import Console
from rich.table import Table

from loadtest import bench_filter_proxy
from loadtest.bench_proxy import profiled
from loadtest.local_cluster import LocalCluster, local_cluster, wait_for
from loadtest.queue.calc import goal_verdicts
from loadtest.queue.delays import cpu_seconds, lateness_run, pending_rss
from loadtest.queue.markdown import block, replace_block
from loadtest.queue.saves import save_figures, scrape_saves
from loadtest.queue.throughput import (
    SHARE_ACK_MODES,
    VALUE_BYTES,
    group_rate,
    prefill,
    share_rate,
)
from yak.clients.admin import AdminClient
from yak.etcd_server import EmbeddedEtcd, free_ports

__all__ = ["main"]

RESULTS = Path(__file__).parent / "results" / "queue.json"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
TOPIC, DELAY_TOPIC = "queue-bench", "queue-delayed"
PENDING_TOPICS = ("pending-plain", "pending-delayed")
PARTITIONS, DELAY_PARTITIONS, PENDING_PARTITIONS = 16, 8, 8
CONSUMERS = 8
WARMUP_S = 2.0
#: The group drains the prefill in a few seconds and has its partitions within ~0.2 s.
GROUP_WARMUP_S = 0.5
DELAY_RATE, DELAY_TICK_S, DELAY_CONSUMERS = 1_000, 0.05, 4
CATCH_UP_S = 180.0
PROXY = 1  # bench_filter_proxy.measure starts proxy 0 for itself
PHASES = ("throughput", "lateness", "pending", "filter")
_DELAYS = {"delayed.delivery.enable": "true", "min.insync.replicas": "2"}


@dataclass(frozen=True)
class Plan:
    """How much of everything: the goals' run, or ``--quick`` (a smoke test of the harness)."""

    prefill_per_partition: int = 30_000
    window_s: float = 10.0
    delay_s: float = 20.0
    pending: int = 1_000_000
    #: How the share members send their accepts (``throughput.SHARE_ACK_MODES``).
    share_ack: str = "piggyback"
    #: The phases to run (``--phases``): all of them unless told.
    phases: tuple[str, ...] = PHASES

    @classmethod
    def quick(cls, **options: Any) -> Plan:
        return cls(
            prefill_per_partition=1_000, window_s=3.0, delay_s=4.0, pending=40_000, **options
        )


async def _topics(admin: AdminClient) -> None:
    specs = [
        (TOPIC, PARTITIONS, {"min.insync.replicas": "2"}),
        (DELAY_TOPIC, DELAY_PARTITIONS, _DELAYS),
        (PENDING_TOPICS[0], PENDING_PARTITIONS, {"min.insync.replicas": "2"}),
        (PENDING_TOPICS[1], PENDING_PARTITIONS, _DELAYS),
    ]
    for name, partitions, configs in specs:
        await admin.create_topic(name, partitions=partitions, replication_factor=3, configs=configs)
    for name, *_ in specs:
        await wait_for(admin, name, "full-isr", timeout_s=60)


async def _share_group(http: httpx.AsyncClient, name: str) -> None:
    """Through the proxy, which answers once its own metadata shows the group."""
    body = {"name": name, "offset_reset": "earliest", "lock_duration_ms": 30_000}
    response = await http.post("/api/v1/share-groups", content=orjson.dumps(body))
    response.raise_for_status()


@contextlib.asynccontextmanager
async def _sampled(
    cluster: LocalCluster, profile: Path | None, phase: str, seconds: float
) -> AsyncIterator[dict[str, Any]]:
    """py-spy on the proxy and every broker during ``phase`` (``--profile``); the phase's
    share-state saves (``queue.saves``: count, p50, p99) and the CPU seconds the proxy and the
    brokers spent (``<phase>_cpu_proxy_s``, ``<phase>_cpu_brokers_s``) land in the yielded dict
    at the end."""
    urls = [cluster.broker_url(b) for b in cluster.brokers]
    figures: dict[str, Any] = {}
    pids = {
        "proxy": [cluster.proxies[PROXY].pid],
        "brokers": [p.pid for p in cluster.brokers.values()],
    }
    cpu_before = {name: cpu_seconds(group) for name, group in pids.items()}
    async with httpx.AsyncClient() as metrics:
        before = await scrape_saves(metrics, urls)
        async with contextlib.AsyncExitStack() as stack:
            if profile is not None:
                targets = {"proxy": cluster.proxies[PROXY].pid}
                targets |= {f"broker-{b}": p.pid for b, p in cluster.brokers.items()}
                for name, pid in targets.items():
                    out = profile / f"{phase}_{name}.txt"
                    await stack.enter_async_context(profiled(pid, out, seconds))
            yield figures
        figures |= save_figures(phase, before, await scrape_saves(metrics, urls))
    for name, group in pids.items():
        figures[f"{phase}_cpu_{name}_s"] = round(cpu_seconds(group) - cpu_before[name], 2)


async def _throughput(
    cluster: LocalCluster, admin: AdminClient, http: httpx.AsyncClient, plan: Plan,
    profile: Path | None,
) -> dict[str, Any]:  # fmt: skip
    """Phases 1 and 2: prefill, the share group's rate, the consumer group's rate."""
    urls = {b: cluster.broker_url(b) for b in cluster.brokers}
    written, seconds, retries = await prefill(admin, urls, TOPIC, plan.prefill_per_partition)
    results: dict[str, Any] = {
        "prefill_records": written,
        "prefill_rps": round(written / seconds),
        "prefill_retries": retries,
        "share_ack_mode": plan.share_ack,
    }
    await _share_group(http, "bench-share")
    async with _sampled(cluster, profile, "share", WARMUP_S + plan.window_s) as saves:
        share = await share_rate(
            http, "bench-share", TOPIC, consumers=CONSUMERS, warmup_s=WARMUP_S,
            window_s=plan.window_s, ack=plan.share_ack,
        )  # fmt: skip
    results |= share.figures("share_ack") | saves
    async with _sampled(cluster, None, "group", 0) as used:
        group = await group_rate(
            http, "bench-group", TOPIC, written, members=CONSUMERS, warmup_s=GROUP_WARMUP_S,
            window_s=plan.window_s,
        )  # fmt: skip
    results |= group.figures("group_poll")
    results |= {k: v for k, v in used.items() if "_cpu_" in k}
    for prefix, total in (
        ("share", "share_ack_total_records"),
        ("group", "group_poll_total_records"),
    ):
        records = results.get(total) or 0
        for side in ("proxy", "brokers"):
            used_s = results.get(f"{prefix}_cpu_{side}_s")
            if records and used_s is not None:
                results[f"{prefix}_cpu_{side}_us_per_record"] = round(used_s / records * 1e6, 1)
    group_rps = results["group_poll_rps"]
    results["share_vs_group_ratio"] = (
        round(results["share_ack_rps"] / group_rps, 3) if group_rps else None
    )
    return results


async def _lateness(
    cluster: LocalCluster, http: httpx.AsyncClient, plan: Plan, profile: Path | None
) -> dict[str, Any]:
    """Phase 3: scheduled records at ``DELAY_RATE``/s, acquired by share members."""
    await _share_group(http, "bench-delays")
    async with _sampled(cluster, profile, "delays", plan.delay_s + 5) as saves:
        delayed = await lateness_run(
            http, "bench-delays", DELAY_TOPIC,
            per_tick=round(DELAY_RATE * DELAY_TICK_S), tick_s=DELAY_TICK_S,
            duration_s=plan.delay_s, consumers=DELAY_CONSUMERS, grace_s=30.0,
            ack=plan.share_ack,
        )  # fmt: skip
    return delayed.figures() | saves | {"delay_ack_mode": plan.share_ack}


async def _pending(cluster: LocalCluster, admin: AdminClient, plan: Plan) -> dict[str, Any]:
    """Phase 4: the brokers' RSS for ``plan.pending`` pending delays."""
    urls = {b: cluster.broker_url(b) for b in cluster.brokers}
    pids = [p.pid for p in cluster.brokers.values()]
    data_dirs = [cluster.folder / f"broker-{b}" for b in cluster.brokers]
    return await pending_rss(admin, urls, pids, data_dirs, PENDING_TOPICS, plan.pending, CATCH_UP_S)


async def _phase(results: dict[str, Any], name: str, work: Awaitable[dict[str, Any]]) -> None:
    """Run one phase; a failure is written down (``<name>_error``) and the next phase runs."""
    try:
        results |= await work
    except Exception as exc:  # a benchmark reports what broke rather than losing the run
        results[f"{name}_error"] = f"{type(exc).__name__}: {exc}"
        Console(stderr=True).print(f"[red]{name} failed:[/red] {exc!r}")


async def run(cluster: LocalCluster, plan: Plan, profile: Path | None) -> dict[str, Any]:
    results: dict[str, Any] = {"load_average_start": os.getloadavg(), "plan": asdict(plan)}
    await asyncio.to_thread(cluster.start_proxy, PROXY)
    limits = httpx.Limits(max_connections=64)
    async with (
        AdminClient(cluster.coordinator_url) as admin,
        httpx.AsyncClient(base_url=cluster.proxy_url(PROXY), timeout=30, limits=limits) as http,
    ):
        await _topics(admin)
        if "throughput" in plan.phases:
            await _phase(results, "throughput", _throughput(cluster, admin, http, plan, profile))
        if "lateness" in plan.phases:
            await _phase(results, "lateness", _lateness(cluster, http, plan, profile))
        if "pending" in plan.phases:
            await _phase(results, "pending", _pending(cluster, admin, plan))
    if "filter" in plan.phases:
        await _phase(results, "filter", _filter(cluster))
    results["load_average_end"] = os.getloadavg()
    return results


async def _filter(cluster: LocalCluster) -> dict[str, Any]:
    """Phase 5: ``bench_filter_proxy.measure`` (a thread: it is blocking ``httpx``)."""
    filtered = await asyncio.to_thread(bench_filter_proxy.measure, cluster)
    return _filter_figures(filtered["micros"])


def _filter_figures(micros: dict[str, list[float]]) -> dict[str, Any]:
    base = min(micros["unfiltered"])
    ratios = {name: min(rounds) / base for name, rounds in micros.items() if name != "unfiltered"}
    out: dict[str, Any] = {
        "filter_cost_ratio": round(max(ratios.values()), 3),
        "filter_unfiltered_cpu_us_per_record": round(base, 2),
    }
    out |= {f"filter_{name}_ratio": round(ratio, 3) for name, ratio in ratios.items()}
    return out


def report(results: dict[str, Any], *, docs: bool, out: Path = RESULTS) -> dict[str, Any]:
    """Write ``queue.json`` (goals and verdicts first), with ``docs`` the block of
    ``docs/benchmarks.md`` (``queue.markdown``), and print the table."""
    goals = goal_verdicts(results)
    document = {
        "benchmark": "queue",
        "goals": goals,
        **results,
        "setup": {
            "brokers": 3,
            "replication_factor": 3,
            "partitions": PARTITIONS,
            "consumers": CONSUMERS,
            "consumer_kind": "raw httpx acquire(500) + accept-all ranges loops, one member id each"
            f" (accepts: {results.get('share_ack_mode', 'separate')})",
            "value_bytes": VALUE_BYTES,
            "warmup_s": WARMUP_S,
            "group_warmup_s": GROUP_WARMUP_S,
            "delay_records_per_s": DELAY_RATE,
            "delay_partitions": DELAY_PARTITIONS,
            "pending_subtracted": "RSS growth of the same 1M records to a topic without delays",
        },
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
    table = Table("figure", "value", "goal", "verdict", title="yak queues (issue 30)")
    for key, verdict in goals.items():
        shown = verdict["value"]
        table.add_row(key, f"{shown:,}" if shown is not None else "-", verdict["goal"],
                      "ok" if verdict["met"] else "missed")  # fmt: skip
    console = Console(width=max(Console().width, 110))
    console.print(table)
    console.print(f"written to {out}")
    return document


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0] if __doc__ else "")
    parser.add_argument("--profile", type=Path, help="py-spy the proxy and brokers into DIR")
    parser.add_argument("--quick", action="store_true", help="a small run: checks the harness")
    parser.add_argument("--logs", type=Path, help="copy the services' logs here at the end")
    parser.add_argument(
        "--share-ack", choices=SHARE_ACK_MODES, default="piggyback",
        help="share members accept inside the next acquire, or with a request of their own",
    )  # fmt: skip
    parser.add_argument(
        "--phases", default=",".join(PHASES),
        help=f"comma-separated phases to run (of {','.join(PHASES)}); a partial run writes "
        "no docs block",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON goes")
    args = parser.parse_args()
    phases = tuple(p for p in args.phases.split(",") if p)
    unknown = set(phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases: {', '.join(sorted(unknown))}")
    options = {"share_ack": args.share_ack, "phases": phases}
    plan = Plan.quick(**options) if args.quick else Plan(**options)
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="yak-bench-queue-") as tmp:
        folder = Path(tmp)
        client_port, peer_port = free_ports(2)
        etcd = EmbeddedEtcd(folder / "etcd", client_port, peer_port, unsafe_no_fsync=True)
        etcd.start()
        try:
            with local_cluster(folder, etcd, f"bench{uuid.uuid4().hex[:8]}") as cluster:
                results = asyncio.run(run(cluster, plan, args.profile))
        finally:
            etcd.stop()
            if args.logs is not None:
                shutil.copytree(folder / "logs", args.logs, dirs_exist_ok=True)
    report(results, docs=not args.quick and phases == PHASES, out=args.out)


if __name__ == "__main__":
    main()
