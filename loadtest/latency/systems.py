"""Every measurement of one system, in order: a Yak build on its cluster (``measure_yak``: idle
produce straight to the brokers through ``loadtest.latency.probe`` run on that build's code,
idle produce through the rest-proxy, back to back through it, end to end at each rate with the
lean client then with ``httpx``, then the CPU phase) and Redis (``measure_redis``: idle XADD,
back to back, then end to end at each rate). Each row is stamped with the
1-minute load average taken when its measurement started.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import replace

import orjson

from loadtest.latency.back_to_back import b2b_proxy, b2b_redis
from loadtest.latency.baseline import ROOT
from loadtest.latency.budget import Budget, budget_rate
from loadtest.latency.cluster import Yak
from loadtest.latency.cpu import CpuPhase
from loadtest.latency.lean_driver import LeanRestDriver
from loadtest.latency.measure import (
    E2E_PARTITIONS,
    VALUE_BYTES,
    IdleSettings,
    cpu_phase,
    end_to_end,
    idle_proxy,
    idle_redis,
    no_idle_hook,
    wait_until_producible,
)
from loadtest.latency.options import Options
from loadtest.latency.rows import Row, latency_row
from loadtest.latency.terminal import console
from loadtest.local_cluster import LocalCluster, wait_for
from loadtest.peers.drivers.redis_streams import RedisStreamsDriver
from loadtest.peers.drivers.yak_rest import YakRestDriver
from loadtest.peers.runner import MeasureHook, no_hook
from yak.clients.admin import AdminClient
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace

__all__ = ["CPU_TOPIC", "IDLE_TOPICS", "idle_broker", "measure_redis", "measure_yak"]

IDLE_TOPICS = {1: "lat-rf1", 3: "lat-rf3"}
CPU_TOPIC = "lat-cpu"
ACKS_NAMES = {0: "0", 1: "1", -1: "all"}
PROBE_TIMEOUT_S = 600.0


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


async def _end_to_end(system: str, yak: Yak, options: Options, budget: Budget | None) -> list[Row]:
    """At each rate, the lean client's row (path ``e2e``, the budget's measurement at
    ``budget_rate``), then ``httpx``'s (``e2e_httpx``)."""
    rows: list[Row] = []
    drivers = (
        ("e2e", LeanRestDriver(yak.proxy_url, replication_factor=3)),
        ("e2e_httpx", YakRestDriver(yak.proxy_url, replication_factor=3)),
    )
    try:
        for rate in options.rates:
            for path, driver in drivers:
                console.log(f"[bold]{system}[/]: end to end at {rate:,} msg/s ({driver.name})")
                load = os.getloadavg()[0]
                e2e_hook: MeasureHook = no_hook
                if budget is not None and path == "e2e" and rate == budget_rate(options.rates):
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
                    path=path,
                )
                rows += _loaded([row], load)
    finally:
        for _, driver in drivers:
            await driver.aclose()
    return rows


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
    console.log(f"[bold]{system}[/]: back-to-back produce through the rest-proxy, RF 1 acks=1")
    load = os.getloadavg()[0]
    rows += _loaded([await b2b_proxy(system, yak.proxy_url, IDLE_TOPICS[1], options.idle)], load)
    if e2e:
        rows += await _end_to_end(system, yak, options, budget)
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
    console.log("[bold]redis[/]: back-to-back XADD")
    load = os.getloadavg()[0]
    rows += _loaded([await b2b_redis(url, options.idle)], load)
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
