"""Latency benchmark (issue 18): idle produce latency, end-to-end latency at fixed rates and
CPU per record, Yak next to Redis Streams and next to a baseline build of itself, in one run on
one machine. Run with ``python -m loadtest.bench_latency`` (``make bench-latency``); the method
is described in ``docs/performance.md``.

1. **Idle one-record produce latency** (the peers' 1 KiB JSON payload as the value, one request
   at a time on one connection, ``--warmup`` unmeasured then ``--samples`` measured, 2 ms
   apart; exact p50/p90/p99):

   - ``broker``: ``BrokerClient.produce`` to the partition's leader (found from the
     coordinator), topics of replication factor 1 and 3, acks 0, 1 and -1; in a process of its
     own running the measured build's client (``loadtest.latency.probe``);
   - ``proxy``: the rest-proxy's ``POST /api/v1/topics/{t}/records?acks=0|1|all``, RF 1 and 3;
   - ``redis``: ``XADD`` from ``redis.asyncio`` with hiredis (``loadtest.peers.servers``'
     redis-server: AOF, fsync every second).

2. **End-to-end latency** at each ``--rates`` (default 1,000 and 10,000 msg/s), measured by
   the peers harness's ``Runner``: 1 KiB records carrying ``time.monotonic_ns()``, one topic of
   16 partitions (RF 3, ``min.insync.replicas`` 2, acks=all, native produce route), batches
   paced every 5 ms, one native group member long-polling ``GET …/records``; Redis the same
   with pipelined XADD and ``XREADGROUP BLOCK`` + ``XACK``. ``--e2e-warmup`` then
   ``--e2e-duration`` measured; p50/p99/p99.9 (HDR).

3. **CPU per record**: ``--cpu-records`` records (default 400,000) through the native produce
   route as fast as 8 concurrent clients of 500 records a request get them acknowledged
   (acks=all, RF 3, 16 partitions); user + system CPU seconds of the rest-proxy and the three
   brokers from ``/proc/<pid>/stat`` after minus before, per acknowledged record.

4. **Budget per hop** (the current build only): the stage histograms of the rest-proxy's and
   every broker's ``/metrics`` (``yak_proxy_produce_stage_seconds``,
   ``yak_proxy_poll_stage_seconds``, ``yak_broker_produce_stage_seconds``,
   ``yak_broker_fetch_stage_seconds``) scraped just before and just after the measured requests
   of the idle proxy rows RF 3 acks=1 and acks=all and the measured part of the end-to-end run
   at 1,000 msg/s (the lowest rate when 1,000 is not among ``--rates``); the bucket counts
   diffed and summed over the brokers, each stage's p50/p99 as Prometheus'
   ``histogram_quantile`` computes it (``loadtest.latency.histograms``). The baseline build gets
   the same tables (``budget_before``) when it exports these metrics (``--baseline`` of a commit
   of issue 18 or later; 5db3bf7 does not); a failed scrape leaves that table out.

**Baseline**: ``--baseline REF`` (default ``5db3bf7``, the code before the speed work; ``--no-
baseline`` skips it) is checked out with ``git worktree add --detach`` in a temporary folder
and a second cluster runs its code (its ``shared`` and ``services/*`` first on the services'
``PYTHONPATH``, ``loadtest.local_cluster``'s ``python_path``; each process logs the files it
imported and the run stops if they are not the worktree's). Each build's cluster is measured
in the same order on fresh topics: idle latencies, end-to-end latencies (``--no-baseline-e2e``
skips the baseline's) and, last, the CPU phase, whose 400 MB (1.2 GB replicated) burst and
the writeback after it would otherwise weigh on whatever came next. One cluster runs at a
time; Redis is measured first, alone. The worktree is removed at the end.
Each build's services are imported once before it is measured (``preflight``): a tree that
cannot start fails the run at once, not minutes into it.

Output: ``loadtest/results/latency.json`` (``--results``): the headline keys
(``proxy_acks1_p50_ms``, ``proxy_acksall_p50_ms`` — RF 3 —, ``redis_xadd_p50_ms``,
``e2e_p99_1k_ms``, ``e2e_p99_10k_ms``, ``redis_e2e_p99_10k_ms``, ``cpu_us_per_record``,
``cpu_us_per_record_before`` and more, see ``loadtest.latency.results.headline``), the goals,
every row and CPU phase, the budget per hop, the machine, the load and the git revisions;
tables on the terminal; and the generated blocks of ``docs/performance.md``, the results and
the budget per hop (``--doc``; ``--no-doc`` leaves it alone; ``--report-only`` rewrites them
from ``--results`` without measuring).
Every process started is stopped at the end, also on errors, Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import orjson
from redis.utils import HIREDIS_AVAILABLE
from rich.console import Console
from rich.table import Table

from loadtest.latency.baseline import (
    ROOT,
    check_origins,
    code_origins,
    current_origins,
    preflight,
    resolve,
    revision,
    worktree,
)
from loadtest.latency.cpu import CpuPhase
from loadtest.latency.histograms import (
    POLL_PATH,
    PRODUCE_PATH,
    RUNTIME_PATH,
    Histograms,
    StageFigure,
    StageKey,
    budget_key,
    budget_rows,
    diff_histograms,
)
from loadtest.latency.measure import (
    CPU_CLIENTS,
    CPU_RECORDS_PER_REQUEST,
    E2E_PARTITIONS,
    VALUE_BYTES,
    IdleSettings,
    cpu_phase,
    end_to_end,
    idle_proxy,
    idle_redis,
    no_idle_hook,
    scrape_stages,
    wait_until_producible,
)
from loadtest.latency.page import page
from loadtest.latency.results import document, evaluate_goals, headline
from loadtest.latency.rows import Row, find_row, latency_row
from loadtest.local_cluster import LocalCluster, code_path, local_cluster, start_etcd, wait_for
from loadtest.peers.drivers.redis_streams import RedisStreamsDriver
from loadtest.peers.drivers.yak_rest import YakRestDriver
from loadtest.peers.environment import machine_description
from loadtest.peers.runner import MeasureHook, no_hook
from loadtest.peers.servers import redis_server, server_versions
from yak.clients.admin import AdminClient
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace

__all__ = ["Options", "main", "parse"]

RESULTS = ROOT / "loadtest" / "results" / "latency.json"
DOC = ROOT / "docs" / "performance.md"
LOGS = ROOT / ".artifacts" / "bench-latency-logs"
DEFAULT_BASELINE = "5db3bf7"
IDLE_TOPICS = {1: "lat-rf1", 3: "lat-rf3"}
CPU_TOPIC = "lat-cpu"
#: The idle proxy rows (RF, acks) whose stages are measured (the budget per hop).
BUDGET_IDLE = ((3, "1"), (3, "all"))
#: The e2e rate whose stages are measured (the lowest of ``--rates`` when it is not there).
BUDGET_RATE = 1_000
ACKS_NAMES = {0: "0", 1: "1", -1: "all"}
PROBE_TIMEOUT_S = 600.0
#: Wide enough for the tables when the output goes to a file or a pipe.
console = Console(width=None if sys.stdout.isatty() else 150, log_path=False)


@dataclass(frozen=True)
class Options:
    idle: IdleSettings = field(default_factory=IdleSettings)
    rates: tuple[int, ...] = (1_000, 10_000)
    e2e_warmup_s: float = 5.0
    e2e_duration_s: float = 10.0
    cpu_records: int = 400_000
    cpu_warmup_requests: int = 40
    baseline: str | None = DEFAULT_BASELINE
    baseline_e2e: bool = True
    results: Path = RESULTS
    doc: Path | None = DOC
    report_only: bool = False
    command: str = "python -m loadtest.bench_latency"

    def settings(self) -> dict[str, Any]:
        return {
            "value_bytes": VALUE_BYTES,
            "idle_samples": self.idle.samples,
            "idle_warmup": self.idle.warmup,
            "idle_interval_s": self.idle.interval_s,
            "e2e_rates": list(self.rates),
            "e2e_partitions": E2E_PARTITIONS,
            "e2e_warmup_s": self.e2e_warmup_s,
            "e2e_duration_s": self.e2e_duration_s,
            "cpu_records": self.cpu_records,
            "cpu_clients": CPU_CLIENTS,
            "cpu_records_per_request": CPU_RECORDS_PER_REQUEST,
            "cpu_warmup_requests": self.cpu_warmup_requests,
            "baseline_e2e": self.baseline_e2e and self.baseline is not None,
        }


def _rates(text: str) -> tuple[int, ...]:
    rates = tuple(int(part) for part in text.split(",") if part.strip())
    if not rates or any(rate <= 0 for rate in rates):
        raise argparse.ArgumentTypeError(f"rates are positive msg/s, comma-separated: {text!r}")
    return rates


def parse(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.bench_latency",
        description=(__doc__ or "").partition("\n\n")[0],
    )
    add = parser.add_argument
    add("--samples", type=int, default=300, help="measured requests per idle row")
    add("--warmup", type=int, default=50, help="unmeasured requests before each idle row")
    add("--rates", type=_rates, default=(1_000, 10_000), help="e2e rates, msg/s (1000,10000)")
    add("--e2e-warmup", type=float, default=5.0, help="seconds before each e2e measurement")
    add("--e2e-duration", type=float, default=10.0, help="seconds measured per e2e rate")
    add("--cpu-records", type=int, default=400_000, help="records of the CPU phase")
    add("--cpu-warmup-requests", type=int, default=40, help="requests before the CPU phase")
    add("--baseline", default=DEFAULT_BASELINE, help="the commit to compare with (5db3bf7)")
    add("--no-baseline", action="store_true", help="measure the current code only")
    add("--no-baseline-e2e", action="store_true", help="no e2e rows for the baseline")
    add("--results", type=Path, default=RESULTS, help="the JSON document")
    add("--doc", type=Path, default=DOC, help="the page whose results block is rewritten")
    add("--no-doc", action="store_true", help="leave docs/performance.md alone")
    add(
        "--report-only",
        action="store_true",
        help="measure nothing: rewrite the page's results block from --results",
    )
    args = parser.parse_args(argv)
    if args.samples < 1 or args.warmup < 0 or args.cpu_records < 1:
        parser.error("--samples and --cpu-records must be ≥ 1, --warmup ≥ 0")
    shown = " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    return Options(
        idle=IdleSettings(samples=args.samples, warmup=args.warmup),
        rates=args.rates,
        e2e_warmup_s=args.e2e_warmup,
        e2e_duration_s=args.e2e_duration,
        cpu_records=args.cpu_records,
        cpu_warmup_requests=args.cpu_warmup_requests,
        baseline=None if args.no_baseline else args.baseline,
        baseline_e2e=not args.no_baseline_e2e,
        results=args.results,
        doc=None if args.no_doc else args.doc,
        report_only=args.report_only,
        command=f"python -m loadtest.bench_latency {shown}".strip(),
    )


# --- processes ------------------------------------------------------------------------------


@dataclass
class Yak:
    """A running cluster of one build: its processes' pids by name (``etcd``, ``coordinator``,
    ``broker-N``, ``rest-proxy-0``) and the code path its services run on."""

    cluster: LocalCluster
    python_path: tuple[str, ...]
    pids: dict[str, int]

    @property
    def proxy_url(self) -> str:
        return self.cluster.proxy_url(0)


@contextmanager
def yak_cluster(label: str, python_path: tuple[str, ...]) -> Iterator[Yak]:
    """etcd, a coordinator, 3 brokers and a rest-proxy on ``python_path``'s code; all
    stopped on exit, their logs then copied to ``LOGS/<label>``."""
    with tempfile.TemporaryDirectory(prefix=f"yak-bench-latency-{label}-") as tmp:
        folder = Path(tmp)
        etcd = start_etcd(folder, unsafe_no_fsync=True)
        try:
            cluster_id = f"latency{uuid.uuid4().hex[:8]}"
            with local_cluster(folder, etcd, cluster_id, python_path=python_path) as cluster:
                cluster.start_proxy(0)
                pids = {p.spec.name: p.pid for p in cluster.supervisor.processes}
                if etcd.pid is not None:
                    pids["etcd"] = etcd.pid
                yield Yak(cluster, python_path, pids)
        finally:
            etcd.stop()
            if (folder / "logs").is_dir():  # every process's log, kept for a post-mortem
                shutil.rmtree(LOGS / label, ignore_errors=True)
                shutil.copytree(folder / "logs", LOGS / label)


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM unwinds like Ctrl-C: every process gets stopped


# --- measuring ------------------------------------------------------------------------------


@dataclass
class Budget:
    """The budget per hop of one build: the stage histograms of ``urls`` (the rest-proxy and
    every broker) scraped around a measurement, diffed, summed over the brokers; ``found``:
    ``budget_key`` → the stages along the request's path. A stage the build does not export is
    left out; a failed scrape leaves the measurement's table out and is printed."""

    urls: tuple[str, ...]
    found: dict[str, list[StageFigure]] = field(default_factory=dict)

    @asynccontextmanager
    async def around(self, key: str, path: Sequence[StageKey]) -> AsyncIterator[None]:
        before = await self._scrape(key)
        yield
        after = await self._scrape(key) if before is not None else None
        if before is None or after is None:
            return
        stages = budget_rows(diff_histograms(after, before), path)
        if stages:
            self.found[key] = stages

    async def _scrape(self, key: str) -> Histograms | None:
        try:
            return await scrape_stages(self.urls)
        except (httpx.HTTPError, ValueError) as exc:  # unreachable, or a text not parsed
            console.print(f"[yellow]budget {key}: no scrape of /metrics ({exc!r})[/]")
            return None

    @asynccontextmanager
    async def idle(self, rf: int, acks: str) -> AsyncIterator[None]:
        """``idle_proxy``'s hook: the rows of ``BUDGET_IDLE`` measured, the others not."""
        if (rf, acks) not in BUDGET_IDLE:
            yield
            return
        async with self.around(budget_key("proxy", rf, acks, None), PRODUCE_PATH + RUNTIME_PATH):
            yield

    def e2e(self, rate: int) -> MeasureHook:
        """``end_to_end``'s measure hook at ``rate``: produce and poll stages."""

        @asynccontextmanager
        async def hook(_duration_s: float) -> AsyncIterator[None]:
            async with self.around(
                budget_key("e2e", 3, "all", rate), PRODUCE_PATH + POLL_PATH + RUNTIME_PATH
            ):
                yield

        return hook


def budget_rate(rates: Sequence[int]) -> int:
    """The e2e rate whose stages are measured: ``BUDGET_RATE``, else the lowest."""
    return BUDGET_RATE if BUDGET_RATE in rates else min(rates)


def _loaded(rows: list[Row], load: float) -> list[Row]:
    """``rows`` stamped with the 1-minute load average ``load`` taken when they started."""
    return [replace(row, load=round(load, 2)) for row in rows]


async def _create_topics(yak: Yak) -> dict[int, int]:
    """The idle topics (1 partition, RF 1 and 3) and the CPU topic; the idle topics' leaders."""
    async with AdminClient(yak.cluster.coordinator_url) as admin:
        for rf, topic in IDLE_TOPICS.items():
            configs = {"min.insync.replicas": "2"} if rf == 3 else {}
            await admin.create_topic(topic, partitions=1, replication_factor=rf, configs=configs)
        await admin.create_topic(
            CPU_TOPIC,
            partitions=E2E_PARTITIONS,
            replication_factor=3,
            configs={"min.insync.replicas": "2"},
        )
        leaders = {}
        for rf, topic in IDLE_TOPICS.items():
            described = await wait_for(admin, topic, "full-isr", timeout_s=60)
            leaders[rf] = described.partitions[0].leader
        await wait_for(admin, CPU_TOPIC, "full-isr", timeout_s=60)
    for topic in (*IDLE_TOPICS.values(), CPU_TOPIC):
        await wait_until_producible(yak.proxy_url, topic)
    return leaders


async def _data_ports(cluster: LocalCluster) -> dict[int, int]:
    """Each broker's internal listener port, from its registration (none on older builds)."""
    store = EtcdMetadataStore.from_url(cluster.etcd.endpoint)
    keyspace = Keyspace(cluster.cluster_id)
    found: dict[int, int] = {}
    try:
        for broker_id in cluster.brokers:
            registered = await store.get(keyspace.broker(broker_id))
            port = orjson.loads(registered.value).get("data_port") if registered else None
            if isinstance(port, int):
                found[broker_id] = port
    finally:
        await store.aclose()
    return found


async def idle_broker(
    system: str, yak: Yak, leaders: dict[int, int], settings: IdleSettings
) -> tuple[list[Row], str]:
    """The ``broker`` rows, from ``loadtest.latency.probe`` run on the build's code; and the
    file its ``yak`` package was imported from."""
    targets = [
        {"rf": rf, "acks": acks, "topic": topic, "partition": 0, "url": ""}
        for rf, topic in sorted(IDLE_TOPICS.items())
        for acks in (0, 1, -1)
    ]
    data_ports = await _data_ports(yak.cluster)
    for target in targets:
        leader = leaders[int(target["rf"])]
        target["url"] = yak.cluster.broker_url(leader)
        if leader in data_ports:  # a build with the internal listener: the probe uses it
            target["data_port"] = data_ports[leader]
    spec = {
        "samples": settings.samples,
        "warmup": settings.warmup,
        "interval_s": settings.interval_s,
        "value_bytes": VALUE_BYTES,
        "targets": targets,
    }
    env = dict(os.environ)
    if yak.python_path:
        env["PYTHONPATH"] = os.pathsep.join(yak.python_path)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "loadtest.latency.probe", json.dumps(spec)),
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), PROBE_TIMEOUT_S)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    if process.returncode != 0:
        raise RuntimeError(f"the broker probe failed ({process.returncode}):\n{err.decode()}")
    answer = json.loads(out.decode().strip().splitlines()[-1])
    rows = [
        latency_row(system, "broker", r["rf"], ACKS_NAMES[r["acks"]], r["ms"], errors=r["errors"])
        for r in answer["rows"]
    ]
    return rows, str(answer["code"])


async def measure_yak(
    yak: Yak, system: str, build: str, options: Options, *, e2e: bool, budget: Budget | None = None
) -> tuple[list[Row], CpuPhase, str]:
    """Every Yak measurement on one build (see the module docstring); the rows, the CPU phase
    and where the probe imported ``yak`` from. ``budget``: the stages measured around the idle
    proxy rows and the e2e run of ``BUDGET_IDLE`` and ``budget_rate``."""
    console.log(f"[bold]{system}[/]: cluster up, creating topics")
    leaders = await _create_topics(yak)
    console.log(f"[bold]{system}[/]: idle produce straight to the brokers")
    load = os.getloadavg()[0]
    found, probe_code = await idle_broker(system, yak, leaders, options.idle)
    rows = _loaded(found, load)
    console.log(f"[bold]{system}[/]: idle produce through the rest-proxy")
    load = os.getloadavg()[0]
    hook = no_idle_hook if budget is None else budget.idle
    rows += _loaded(await idle_proxy(system, yak.proxy_url, IDLE_TOPICS, options.idle, hook), load)
    if e2e:
        driver = YakRestDriver(yak.proxy_url, replication_factor=3)
        try:
            for rate in options.rates:
                console.log(f"[bold]{system}[/]: end to end at {rate:,} msg/s")
                load = os.getloadavg()[0]
                e2e_hook: MeasureHook = no_hook
                if budget is not None and rate == budget_rate(options.rates):
                    e2e_hook = budget.e2e(rate)
                row = await end_to_end(
                    system,
                    driver,
                    rate,
                    rf=3,
                    acks="all",
                    warmup_s=options.e2e_warmup_s,
                    duration_s=options.e2e_duration_s,
                    measure_hook=e2e_hook,
                )
                rows += _loaded([row], load)
        finally:
            await driver.aclose()
    console.log(f"[bold]{system}[/]: CPU phase, {options.cpu_records:,} records")
    load = os.getloadavg()[0]
    counted = tuple(name for name in yak.pids if name.startswith(("broker-", "rest-proxy-")))
    phase = await cpu_phase(
        build,
        yak.proxy_url,
        CPU_TOPIC,
        yak.pids,
        counted,
        records=options.cpu_records,
        warmup_requests=options.cpu_warmup_requests,
    )
    phase.load = round(load, 2)
    return rows, phase, probe_code


async def measure_redis(url: str, options: Options) -> list[Row]:
    console.log("[bold]redis[/]: idle XADD")
    load = os.getloadavg()[0]
    rows = _loaded([await idle_redis(url, options.idle)], load)
    driver = RedisStreamsDriver(url)
    try:
        for rate in options.rates:
            console.log(f"[bold]redis[/]: end to end at {rate:,} msg/s")
            load = os.getloadavg()[0]
            row = await end_to_end(
                "redis",
                driver,
                rate,
                rf=1,
                acks=None,
                warmup_s=options.e2e_warmup_s,
                duration_s=options.e2e_duration_s,
            )
            rows += _loaded([row], load)
    finally:
        await driver.aclose()
    return rows


# --- reporting ------------------------------------------------------------------------------

_SYSTEM_ORDER = {"yak": 0, "yak-before": 1, "redis": 2}
_PATH_ORDER = {"broker": 0, "proxy": 1, "proxy_httpx": 2, "xadd": 3, "e2e": 4}
_ACKS_ORDER = {"0": 0, "1": 1, "all": 2, None: 3}


def _ordered(rows: Sequence[Row]) -> list[Row]:
    return sorted(
        rows,
        key=lambda r: (
            _PATH_ORDER.get(r.path, 9),
            r.rate or 0,
            r.rf or 0,
            _ACKS_ORDER.get(r.acks, 9),
            _SYSTEM_ORDER.get(r.system, 9),
        ),
    )


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"


def _fine_ms(value: float | None) -> str:
    """A stage's ms, to the µs below 1 ms."""
    return _ms(value) if value is None or value >= 1 else f"{value:.3f}"


def print_report(doc: dict[str, Any], rows: Sequence[Row], cpu: Sequence[CpuPhase]) -> None:
    table = Table(
        *("system", "path", "RF", "acks", "rate", "p50", "p90", "p99", "p99.9"),
        *("ack p50/p99", "samples", "err", "load"),
        title="produce latency, ms (idle: one 1 KiB record a request; e2e: producer → consumer)",
    )
    for row in rows:
        ack = "-" if row.ack_p50 is None else f"{_ms(row.ack_p50)}/{_ms(row.ack_p99)}"
        table.add_row(
            row.system,
            row.path,
            str(row.rf or "-"),
            row.acks or "-",
            f"{row.rate:,}/s" if row.rate else "idle",
            _ms(row.p50),
            _ms(row.p90),
            _ms(row.p99),
            _ms(row.p999),
            ack,
            f"{row.samples:,}",
            str(row.errors),
            "-" if row.load is None else f"{row.load:.1f}",
        )
    console.print(table)
    befores = [r for r in rows if r.system == "yak-before"]
    if befores:
        compare = Table(
            "path",
            "RF",
            "acks",
            "rate",
            "p50 before",
            "p50 now",
            "p99 before",
            "p99 now",
            title=f"before ({doc.get('baseline')}) and now (ms)",
        )
        for before in befores:
            now = find_row(
                rows, "yak", before.path, rf=before.rf, acks=before.acks, rate=before.rate
            )
            compare.add_row(
                before.path,
                str(before.rf or "-"),
                before.acks or "-",
                f"{before.rate:,}/s" if before.rate else "idle",
                _ms(before.p50),
                _ms(None if now is None else now.p50),
                _ms(before.p99),
                _ms(None if now is None else now.p99),
            )
        console.print(compare)
    cpu_table = Table(
        "build",
        "records",
        "s",
        "records/s",
        "µs/record",
        "proxy µs",
        "brokers µs",
        "coordinator µs",
        "etcd µs",
        "errors",
        "load",
        title="CPU per acknowledged record (counted: rest-proxy + brokers)",
    )
    for phase in cpu:
        per = {name: phase.us_per_record([name]) for name in phase.cpu_s}
        brokers = sum(v for k, v in per.items() if k.startswith("broker-") and v is not None)
        cpu_table.add_row(
            phase.build,
            f"{phase.records:,}",
            f"{phase.elapsed_s:.1f}",
            f"{phase.records_per_s:,.0f}",
            _ms(phase.cpu_us_per_record),
            _ms(per.get("rest-proxy-0")),
            _ms(brokers),
            _ms(per.get("coordinator")),
            _ms(per.get("etcd")),
            f"{phase.errors + phase.failed_requests}",
            "-" if phase.load is None else f"{phase.load:.1f}",
        )
    console.print(cpu_table)
    for key, stages in doc.get("budget", {}).items():
        budget_table = Table(
            "service",
            "request",
            "stage",
            "count",
            "p50",
            "p99",
            title=f"budget per hop: {key} (ms)",
        )
        for stage in stages:
            budget_table.add_row(
                stage["service"],
                stage["request"],
                stage["stage"],
                f"{stage['count']:,}",
                _fine_ms(stage["p50_ms"]),
                _fine_ms(stage["p99_ms"]),
            )
        console.print(budget_table)
    goals = Table("goal", "measured", "from", "verdict", title="goals (issue 18)")
    for goal in evaluate_goals(headline(rows, cpu)):
        style = {None: "dim", True: "green", False: "red"}[goal.ok]
        goals.add_row(goal.name, goal.shown, goal.detail, f"[{style}]{goal.verdict}[/]")
    console.print(goals)


def environment(options: Options, baseline_commit: str | None) -> dict[str, Any]:
    one, five, fifteen = os.getloadavg()
    versions = server_versions()
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": options.command,
        "machine": machine_description(),
        "load": f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min) at start",
        "revision": revision(),
        "baseline": baseline_commit[:12] if baseline_commit else None,
        "versions": {
            "python": versions["python"],
            "redis-server": versions["redis-server"],
            "redis-py hiredis parser": HIREDIS_AVAILABLE,
        },
    }


@contextmanager
def _stage(name: str, failures: dict[str, str]) -> Iterator[None]:
    """Run a stage; an error in it is printed and kept in ``failures``, and the run goes on
    (what the other stages measured is still written)."""
    try:
        yield
    except Exception as exc:  # reported with the results, not lost with them
        failures[name] = f"{type(exc).__name__}: {exc}"
        console.print(f"[red]{name} failed[/] (logs in {LOGS}):")
        console.print_exception(max_frames=8)


def run(options: Options) -> dict[str, Any]:
    """Every measurement (see the module docstring); the results document."""
    started = time.monotonic()
    preflight()
    baseline_commit = resolve(options.baseline) if options.baseline else None
    env = environment(options, baseline_commit)
    rows: list[Row] = []
    cpu: list[CpuPhase] = []
    origins: dict[str, dict[str, str]] = {}
    failures: dict[str, str] = {}
    with _stage("redis", failures), redis_server() as url:
        rows += asyncio.run(measure_redis(url, options))
    before_budget = Budget(())
    if options.baseline:
        with _stage("baseline", failures), worktree(options.baseline) as tree:
            preflight(code_path(tree))
            console.log(f"[bold]yak-before[/]: starting a cluster on {tree}")
            with yak_cluster("baseline", code_path(tree)) as yak:
                brokers = tuple(yak.cluster.broker_url(b) for b in sorted(yak.cluster.brokers))
                before_budget = Budget((yak.proxy_url, *brokers))
                processes = {p.spec.name: p for p in yak.cluster.supervisor.processes}
                origins["baseline"] = code_origins(processes)
                check_origins(origins["baseline"], tree)
                found, phase, probe_code = asyncio.run(
                    measure_yak(
                        yak, "yak-before", "baseline", options,
                        e2e=options.baseline_e2e, budget=before_budget,
                    )
                )  # fmt: skip
                origins["baseline"]["broker probe"] = probe_code
                check_origins(origins["baseline"], tree)
                rows += found
                cpu.append(phase)
    console.log("[bold]yak[/]: starting a cluster on this checkout")
    budget = Budget(())
    with _stage("current", failures), yak_cluster("current", ()) as yak:
        brokers = tuple(yak.cluster.broker_url(b) for b in sorted(yak.cluster.brokers))
        budget = Budget((yak.proxy_url, *brokers))
        found, phase, probe_code = asyncio.run(
            measure_yak(yak, "yak", "current", options, e2e=True, budget=budget)
        )
        origins["current"] = {**current_origins(), "broker probe": probe_code}
        rows += found
        cpu.insert(0, phase)
    one, five, fifteen = os.getloadavg()
    env["load_at_end"] = f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} at the end"
    env["code"] = origins
    env["failures"] = failures
    rows = _ordered(rows)
    doc = document(rows, cpu, env, options.settings(), budget.found)
    doc["budget_before"] = {
        key: [f.to_json() for f in stages] for key, stages in before_budget.found.items() if stages
    }
    doc["wall_s"] = round(time.monotonic() - started, 1)
    print_report(doc, rows, cpu)
    for name, failure in failures.items():
        console.print(f"[red]{name} failed:[/] {failure}")
    return doc


def write(doc: dict[str, Any], options: Options) -> None:
    options.results.parent.mkdir(parents=True, exist_ok=True)
    options.results.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    console.print(f"written to {options.results} ({doc['wall_s']:.0f} s)")
    if options.doc is None:
        return
    if doc["failures"]:
        console.print(f"[yellow]{options.doc} not updated: a stage failed[/]")
        return
    try:
        options.doc.write_text(page(options.doc.read_text(), doc))
    except (OSError, ValueError) as exc:
        console.print(f"[yellow]{options.doc} not updated: {exc}[/]")
        return
    console.print(f"results and budget blocks of {options.doc} rewritten")


def main(argv: Sequence[str] | None = None) -> int:
    options = parse(argv)
    if options.report_only:
        if options.doc is not None:
            doc = json.loads(options.results.read_text())
            options.doc.write_text(page(options.doc.read_text(), doc))
            console.print(
                f"results and budget blocks of {options.doc} rewritten from {options.results}"
            )
        return 0
    signal.signal(signal.SIGTERM, _interrupt)
    doc = run(options)
    write(doc, options)
    return 1 if doc["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
