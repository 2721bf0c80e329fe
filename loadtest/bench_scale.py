"""``make bench-scale`` (issue 19): does the cluster stay calm as partitions grow?

On one machine: etcd, two coordinators (an active controller and a standby), three brokers
(leases of 6 s, the broker's default), a rest-proxy and the console (``loadtest.local_cluster``).
The cluster grows in steps (``--steps``, default 1,000 → 5,000 → 20,000 partitions, RF 3,
``--partitions-per-topic`` 20, topics created through the coordinator 8 at a time), and at
each step the benchmark measures:

- **create** — from the first create to the last answer; **converge** — from the last answer
  until the coordinator counts every partition led and none under-replicated and the brokers
  host every replica (their ``yak_broker_partitions``);
- **idle** (``--idle`` seconds, no client traffic): CPU cores used by each broker and by the
  active coordinator (``/proc/<pid>/stat``), resident memory and open files of each broker, and
  every service's event-loop lag p99 (``yak_event_loop_lag_seconds``, diffed around the window);
- **console**: the time of ``GET /topics`` and of one topic's page;
- **controller failover**: kill -9 of the active coordinator until the standby is controller
  (the killed one is started again, as the standby);
- **broker restart**: kill -9 of broker 2, started again at once on its data, until no
  partition is under-replicated;
- **leases lost**: broker registrations that vanished other than by the benchmark's kills
  (``RegistrationWatch``), over the whole run.

A step that does not converge within ``--converge-timeout`` ends the run (its figures are kept).
Writes ``loadtest/results/scale.json`` (the keys of the issue: ``partitions_max`` — the largest
step that met every goal —, ``converge_s_20k``, ``idle_cpu_per_broker_20k``, ``leases_lost``,
``loop_lag_p99_ms_20k``, ``failover_s_20k``, ``restart_to_isr_s_20k``; every step's figures)
and plots ``docs/benchmarks/scale-*.png`` against partitions. ``--quick`` is a smoke run
(steps of 60 and 200 partitions, 3 s idle, no plots).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import logging
import os
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from loadtest.latency.histograms import diff_histograms, histogram_quantile, stage_histograms
from loadtest.latency.measure import cpu_seconds
from loadtest.local_cluster import LocalCluster, RegistrationWatch, local_cluster, start_etcd
from yak.api.admin import ADMIN_PREFIX
from yak.clients.admin import AdminClient
from yak.errors import YakError
from yak.supervisor import StartupError

_log = logging.getLogger(__name__)

__all__ = ["GOALS", "Step", "main", "meets_goals", "parse"]

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "loadtest" / "results" / "scale.json"
PLOTS = ROOT / "docs" / "benchmarks"
BROKERS = 3
REPLICATION_FACTOR = 3
RESTARTED_BROKER = 2
CREATE_CONCURRENCY = 8
LEASE_TTL_S = 6
POLL_S = 0.5

#: The issue's goals at each step (on a 2-core machine, 3 brokers).
GOALS = {
    "converge_s": 120.0,
    "idle_cpu_per_broker": 0.05,
    "loop_lag_p99_ms": 50.0,
    "failover_s": 10.0,
    "restart_to_isr_s": 60.0,
}


@dataclass
class Step:
    """What one step measured (None: not measured, or it failed)."""

    partitions: int
    topics: int
    create_s: float | None = None
    converge_s: float | None = None
    idle_cpu: dict[str, float] = field(default_factory=dict)
    rss_mb: dict[str, float] = field(default_factory=dict)
    open_files: dict[str, int] = field(default_factory=dict)
    loop_lag_p99_ms: dict[str, float | None] = field(default_factory=dict)
    console_topics_s: float | None = None
    console_topic_s: float | None = None
    failover_s: float | None = None
    restart_to_isr_s: float | None = None
    leases_lost: int = 0
    error: str | None = None

    @property
    def idle_cpu_per_broker(self) -> float | None:
        cores = [v for k, v in self.idle_cpu.items() if k.startswith("broker-")]
        return max(cores) if cores else None

    @property
    def worst_loop_lag_p99_ms(self) -> float | None:
        lags = [v for v in self.loop_lag_p99_ms.values() if v is not None]
        return max(lags) if lags else None


def meets_goals(step: Step) -> bool:
    """Whether ``step`` met every goal of the issue (a figure not measured does not)."""
    figures = {
        "converge_s": step.converge_s,
        "idle_cpu_per_broker": step.idle_cpu_per_broker,
        "loop_lag_p99_ms": step.worst_loop_lag_p99_ms,
        "failover_s": step.failover_s,
        "restart_to_isr_s": step.restart_to_isr_s,
    }
    return (
        step.error is None
        and step.leases_lost == 0
        and all(v is not None and v <= GOALS[k] for k, v in figures.items())
    )


# --- measuring ------------------------------------------------------------------------------


def _process_memory(pid: int) -> tuple[float, int]:
    """Resident MB and open file descriptors of ``pid``."""
    rss_kb = 0
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
    return rss_kb / 1024, len(os.listdir(f"/proc/{pid}/fd"))


async def _lag_histograms(http: httpx.AsyncClient, urls: dict[str, str]) -> dict[str, Any]:
    found = {}
    for name, url in urls.items():
        try:
            response = await http.get(f"{url}/metrics")
            found[name] = stage_histograms(response.text)
        except httpx.HTTPError:
            found[name] = {}
    return found


def _lag_p99_ms(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float | None]:
    figures: dict[str, float | None] = {}
    for name, histograms in after.items():
        window = diff_histograms(histograms, before.get(name, {}))
        lag = next((b for (_s, r, st), b in window.items() if st == "event loop lag"), None)
        p99 = histogram_quantile(0.99, lag) if lag else None
        figures[name] = None if p99 is None else round(p99 * 1000, 2)
    return figures


async def _cluster_state(admin: AdminClient) -> tuple[int, int, int, str | None]:
    info = await admin.cluster()
    controller = info.controller.coordinator_id if info.controller is not None else None
    return (
        info.partition_count,
        info.offline_partition_count,
        info.under_replicated_partition_count,
        controller,
    )


_HOSTED = re.compile(rb"^yak_broker_partitions (\S+)$", re.MULTILINE)


async def _hosted(http: httpx.AsyncClient, broker_urls: Sequence[str]) -> int:
    """Partition replicas the brokers host (their ``yak_broker_partitions``, summed)."""
    total = 0
    for url in broker_urls:
        found = _HOSTED.search((await http.get(f"{url}/metrics")).content)
        total += int(float(found[1])) if found else 0
    return total


async def _wait_converged(
    admin: AdminClient, broker_urls: Sequence[str], partitions: int, timeout_s: float
) -> float:
    """Seconds until ``partitions`` are all led and fully replicated, as the coordinator sees
    them, and every replica is hosted by its broker; TimeoutError after ``timeout_s``."""
    started = time.monotonic()
    poll_s = POLL_S if partitions < 5_000 else 2.0  # a broker's /metrics grows with replicas
    async with httpx.AsyncClient(timeout=60) as http:
        while True:
            try:
                count, offline, under, _ = await _cluster_state(admin)
                led = count >= partitions and offline == 0 and under == 0
                wanted = partitions * REPLICATION_FACTOR
                if led and await _hosted(http, broker_urls) >= wanted:
                    return time.monotonic() - started
            except (YakError, httpx.HTTPError):
                pass  # a controller or a broker moving: ask again
            if time.monotonic() - started > timeout_s:
                raise TimeoutError(
                    f"not converged at {partitions:,} partitions in {timeout_s:.0f} s"
                )
            await asyncio.sleep(poll_s)  # other processes' state: nothing local to wait on


async def _create(admin: AdminClient, names: Sequence[str], per_topic: int) -> None:
    gate = asyncio.Semaphore(CREATE_CONCURRENCY)

    async def one(name: str) -> None:
        async with gate:
            await admin.create_topic(
                name,
                partitions=per_topic,
                replication_factor=REPLICATION_FACTOR,
                configs={"min.insync.replicas": "2"},
            )

    await asyncio.gather(*(one(n) for n in names))


async def _timed_get(http: httpx.AsyncClient, url: str) -> float | None:
    started = time.monotonic()
    try:
        response = await http.get(url)
    except httpx.HTTPError:
        return None
    return time.monotonic() - started if response.status_code == 200 else None


class Bench:
    """One cluster grown step by step (see the module docstring)."""

    def __init__(self, cluster: LocalCluster, options: argparse.Namespace) -> None:
        self.cluster = cluster
        self.options = options
        self.topics = 0
        self.killed: list[tuple[int, float]] = []  # (broker, when) of the benchmark's kills

    def _broker_urls(self) -> list[str]:
        return [self.cluster.broker_url(b) for b in sorted(self.cluster.brokers)]

    def _urls(self) -> dict[str, str]:
        cluster = self.cluster
        urls = {f"broker-{b}": cluster.broker_url(b) for b in cluster.brokers}
        urls |= {f"coordinator-{i}": url for i, url in cluster.coordinator_urls.items()}
        return urls | {"rest-proxy-0": cluster.proxy_url(0)}

    def _pids(self) -> dict[str, int]:
        cluster = self.cluster
        pids = {f"broker-{b}": p.pid for b, p in cluster.brokers.items()}
        return pids | {f"coordinator-{i}": p.pid for i, p in cluster.coordinators.items()}

    async def step(self, target: int, watch: RegistrationWatch) -> Step:
        per_topic = self.options.partitions_per_topic
        wanted = -(-target // per_topic)
        step = Step(target, wanted)
        admin = AdminClient(self.cluster.coordinator_urls[self._active_index()])
        async with admin, httpx.AsyncClient(timeout=120) as http:
            names = [f"scale-{i:05d}" for i in range(self.topics, wanted)]
            started = time.monotonic()
            await _create(admin, names, per_topic)
            step.create_s = round(time.monotonic() - started, 2)
            self.topics = wanted
            step.converge_s = round(
                await _wait_converged(
                    admin, self._broker_urls(), wanted * per_topic, self.options.converge_timeout
                ),
                2,
            )
            await self._idle(step, http)
            console = self.cluster.console_url
            step.console_topics_s = await _timed_get(http, f"{console}/topics")
            step.console_topic_s = await _timed_get(http, f"{console}/topics/scale-00000")
            step.failover_s = await self._failover(http)
            step.restart_to_isr_s = await self._restart_broker(wanted * per_topic)
        step.leases_lost = self._leases_lost(watch)
        return step

    async def _idle(self, step: Step, http: httpx.AsyncClient) -> None:
        pids, urls = self._pids(), self._urls()
        lag_before = await _lag_histograms(http, urls)
        cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        started = time.monotonic()
        await asyncio.sleep(self.options.idle)  # the idle window itself
        elapsed = time.monotonic() - started
        cpu_after = {name: cpu_seconds(pid) for name, pid in pids.items()}
        lag_after = await _lag_histograms(http, urls)
        step.idle_cpu = {
            name: round((cpu_after[name] - cpu_before[name]) / elapsed, 3) for name in pids
        }
        for name, pid in pids.items():
            rss, files = _process_memory(pid)
            step.rss_mb[name] = round(rss, 1)
            step.open_files[name] = files
        step.loop_lag_p99_ms = _lag_p99_ms(lag_before, lag_after)

    def _active_index(self) -> int:
        return next(iter(self.cluster.coordinators))

    async def _controller(self, http: httpx.AsyncClient, url: str) -> str | None:
        try:
            response = await http.get(f"{url}{ADMIN_PREFIX}/cluster")
            controller = response.json().get("controller") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None
        return controller.get("coordinator_id") if isinstance(controller, dict) else None

    async def _failover(self, http: httpx.AsyncClient) -> float | None:
        cluster = self.cluster
        urls = cluster.coordinator_urls
        active = await self._controller(http, urls[0])
        if active is None or len(urls) < 2:
            return None
        index = int(active.removeprefix("c"))
        standby = next(i for i in urls if i != index)
        cluster.kill_coordinator(index)
        started = time.monotonic()
        failover: float | None = None
        while time.monotonic() - started < 60:
            if await self._controller(http, urls[standby]) == f"c{standby}":
                failover = round(time.monotonic() - started, 2)
                break
            await asyncio.sleep(0.1)  # another process's election: nothing local to wait on
        cluster.start_coordinator(index)  # back, as the standby
        return failover

    async def _restart_broker(self, partitions: int) -> float | None:
        cluster = self.cluster
        cluster.kill(RESTARTED_BROKER)
        self.killed.append((RESTARTED_BROKER, time.monotonic()))
        started = time.monotonic()
        timeout_s = self.options.converge_timeout
        try:  # in a thread: the registration watch on this loop keeps reading meanwhile
            await asyncio.to_thread(
                partial(cluster.start_broker, RESTARTED_BROKER, ready_timeout_s=timeout_s)
            )
        except StartupError as exc:
            _log.warning("the restarted broker did not come back: %s", exc)
            return None
        admin = AdminClient(cluster.coordinator_urls[self._active_index()])
        async with admin:
            try:
                await _wait_converged(
                    admin, self._broker_urls(), partitions, self.options.converge_timeout
                )
            except TimeoutError:
                return None
        return round(time.monotonic() - started, 2)

    def _leases_lost(self, watch: RegistrationWatch) -> int:
        """Registrations that vanished, other than the restarted broker's right at its kill."""
        ours = [(b, t) for b, t in self.killed]
        lost = 0
        for broker, when in watch.vanished:
            if not any(b == broker and abs(when - t) < LEASE_TTL_S + 5 for b, t in ours):
                lost += 1
        return lost


# --- the run --------------------------------------------------------------------------------


async def run(options: argparse.Namespace) -> list[Step]:
    steps: list[Step] = []
    with tempfile.TemporaryDirectory(prefix="yak-bench-scale-") as tmp:
        folder = Path(tmp)
        etcd = start_etcd(folder)
        try:
            cluster_id = f"scale{uuid.uuid4().hex[:8]}"
            with local_cluster(
                folder, etcd, cluster_id, BROKERS, lease_ttl_s=LEASE_TTL_S
            ) as cluster:
                cluster.start_coordinator(1)
                cluster.start_proxy(0)
                cluster.start_console(0)
                bench = Bench(cluster, options)
                async with RegistrationWatch(cluster) as watch:
                    for target in options.steps:
                        print(f"step: {target:,} partitions", flush=True)
                        try:
                            step = await bench.step(target, watch)
                        except (TimeoutError, YakError, httpx.HTTPError) as exc:
                            step = Step(target, -(-target // options.partitions_per_topic))
                            step.error = str(exc) or type(exc).__name__
                            step.leases_lost = bench._leases_lost(watch)
                        steps.append(step)
                        print(json.dumps(_step_json(step)), flush=True)
                        if step.error is not None:
                            break
        finally:
            etcd.stop()
    return steps


def _step_json(step: Step) -> dict[str, Any]:
    return {
        **asdict(step),
        "idle_cpu_per_broker": step.idle_cpu_per_broker,
        "worst_loop_lag_p99_ms": step.worst_loop_lag_p99_ms,
        "meets_goals": meets_goals(step),
    }


def document(steps: Sequence[Step], options: argparse.Namespace) -> dict[str, Any]:
    """``scale.json``: the issue's keys from the 20,000 step (or the largest), every step."""
    largest = max(steps, key=lambda s: s.partitions) if steps else None
    top = next((s for s in steps if s.partitions == 20_000), largest)
    met = [s.partitions for s in steps if meets_goals(s)]
    return {
        "benchmark": "scale",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python -m loadtest.bench_scale " + " ".join(sys.argv[1:]),
        "settings": {
            "steps": list(options.steps),
            "partitions_per_topic": options.partitions_per_topic,
            "replication_factor": 3,
            "brokers": BROKERS,
            "idle_s": options.idle,
            "lease_ttl_s": LEASE_TTL_S,
        },
        "goals": GOALS,
        "partitions_max": max(met) if met else 0,
        "converge_s_20k": top.converge_s if top else None,
        "idle_cpu_per_broker_20k": top.idle_cpu_per_broker if top else None,
        "leases_lost": max((s.leases_lost for s in steps), default=0),
        "loop_lag_p99_ms_20k": top.worst_loop_lag_p99_ms if top else None,
        "failover_s_20k": top.failover_s if top else None,
        "restart_to_isr_s_20k": top.restart_to_isr_s if top else None,
        "figures_from_partitions": top.partitions if top else None,
        "steps": [_step_json(s) for s in steps],
    }


def plot(steps: Sequence[Step], folder: Path) -> list[Path]:
    """One PNG per figure against partitions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [s for s in steps if s.converge_s is not None]
    if not done:
        return []
    x = [s.partitions for s in done]
    brokers = sorted(n for n in done[-1].open_files if n.startswith("broker-"))
    panels: dict[str, tuple[str, dict[str, list[float | None]]]] = {
        "scale-converge.png": (
            "seconds",
            {"create": [s.create_s for s in done], "converge": [s.converge_s for s in done]},
        ),
        "scale-idle-cpu.png": (
            "cores",
            {n: [s.idle_cpu.get(n) for s in done] for n in sorted(done[-1].idle_cpu)},
        ),
        "scale-loop-lag.png": (
            "event-loop lag p99, ms",
            {n: [s.loop_lag_p99_ms.get(n) for s in done] for n in sorted(done[-1].loop_lag_p99_ms)},
        ),
        "scale-memory-files.png": (
            "RSS MB / open files",
            {f"{n} RSS": [s.rss_mb.get(n) for s in done] for n in brokers}
            | {f"{n} files": [_float(s.open_files.get(n)) for s in done] for n in brokers},
        ),
    }
    written = []
    folder.mkdir(parents=True, exist_ok=True)
    for name, (ylabel, series) in panels.items():
        figure, axes = plt.subplots(figsize=(7, 4))
        for label, values in series.items():
            axes.plot(
                x, [float("nan") if v is None else v for v in values], marker="o", label=label
            )
        axes.set_xlabel("partitions (RF 3, 3 brokers)")
        axes.set_ylabel(ylabel)
        axes.set_xscale("log")
        axes.legend(fontsize="small")
        axes.grid(True, alpha=0.3)
        figure.tight_layout()
        figure.savefig(folder / name, dpi=100)
        plt.close(figure)
        written.append(folder / name)
    return written


def _float(value: int | None) -> float | None:
    return None if value is None else float(value)


def _steps(text: str) -> tuple[int, ...]:
    values = tuple(int(v) for v in text.split(",") if v.strip())
    if not values or any(v <= 0 for v in values) or list(values) != sorted(values):
        raise argparse.ArgumentTypeError("increasing positive partition counts, comma-separated")
    return values


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_scale", description=__doc__)
    parser.add_argument("--steps", type=_steps, default=(1_000, 5_000, 20_000))
    parser.add_argument("--partitions-per-topic", type=int, default=20)
    parser.add_argument("--idle", type=float, default=20.0, help="seconds of the idle window")
    parser.add_argument("--converge-timeout", type=float, default=600.0)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--plots", type=Path, default=PLOTS)
    parser.add_argument("--quick", action="store_true", help="a smoke run: no plots")
    options = parser.parse_args(argv)
    if options.quick:
        options.steps, options.idle, options.converge_timeout = (60, 200), 3.0, 120.0
        options.partitions_per_topic = 10
    return options


def main(argv: Sequence[str] | None = None) -> int:
    options = parse(argv)
    steps = asyncio.run(run(options))
    doc = document(steps, options)
    options.results.parent.mkdir(parents=True, exist_ok=True)
    options.results.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"written to {options.results}")
    if not options.quick:
        for path in plot(steps, options.plots):
            print(f"plotted {path}")
    return 0 if steps and steps[-1].error is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
