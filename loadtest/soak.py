"""``make soak``: a local cluster under steady load for a long time, with a fault every few
minutes; does anything leak, slow down or lose records?

1. Starts, on loopback, the chaos suite's cluster (``loadtest.chaos.cluster``): a 3-member
   etcd, 2 coordinators, 3 brokers (broker-2 under the chaos shim, for a slow disk) and 2
   rest-proxies, leases of 2 s; services are given all three etcd members. A topic of
   ``--partitions`` partitions, RF 3, ``min.insync.replicas=2``.
2. Measures the highest acknowledged produce rate through a proxy for ``--probe`` seconds
   (the SDK's idempotent producer, acks=all, as fast as it goes, on a topic of its own), or
   takes ``--rate``.
3. For ``--duration`` (default 30 min; ``make soak SOAK_MINUTES=120``) produces at half that
   rate through proxy-0 (records numbered, stamped with their send time) while a consumer
   group reads everything through proxy-1 and commits every second. Every ``--fault-every``
   (default 5 min) one fault of the rotation in ``loadtest.soak_faults`` (kill -9, SIGTERM,
   SIGSTOP of a broker; kill -9 of a proxy, of the active coordinator, of an etcd member; a
   slow disk), healed before the next: what died is started again, a full ISR awaited.
4. Every ``--sample-every`` seconds: each process's resident memory and open file
   descriptors (``/proc``, etcd members included), each etcd member's own metrics
   (``loadtest.soak_etcd``), and the window's produce latency (send to acknowledgement) and
   end-to-end latency (send to consumption) percentiles and rates.
5. At the end it stops producing, waits for the consumer to catch up, and checks that every
   acknowledged record was consumed (lost ones fail the run; duplicates are counted apart).

Writes ``loadtest/results/soak.json`` (slopes per process: RSS MB/hour and fds/hour, each
incarnation fitted on its own, over the whole run and after ``--warmup``; the faults with
their times; etcd's metrics; p99 latency ms/hour; the delivery account; every window) and
plots ``docs/benchmarks/soak-*.png``; ``--results``/``--plots`` put them elsewhere. Exit
code 1 when a record was lost. ``docs/soak.md`` says how to read it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

from loadtest.chaos.cluster import ETCD_MEMBERS, ChaosCluster
from loadtest.chaos.faults import FaultContext
from loadtest.chaos.network import LoopbackNetwork
from loadtest.chaos.runner import wait_full_isr
from loadtest.chaos.shim import Shim, build_shim
from loadtest.soak_etcd import scrape_members
from loadtest.soak_faults import FaultLog, SoakFault, choose_faults
from loadtest.soak_memory import memory_profiles, profiled_urls, read_process
from loadtest.soak_plots import plot_soak
from loadtest.soak_report import build_document, print_summary
from loadtest.soak_stats import (
    ACKED,
    FAILED,
    ProcessSample,
    Window,
    account_delivery,
    parse_duration,
)
from yak.errors import YakError
from yak.etcd_server import SNAPSHOT_COUNT
from yak.observability.memory import ENV as MEMORY_ENV
from yak.sdk import AsyncConsumer, AsyncProducer, RecordMetadata

__all__ = ["SoakCluster", "SoakOptions", "main", "run_soak"]

RESULTS = Path(__file__).parent / "results" / "soak.json"
PLOTS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"
LOGS = Path(__file__).resolve().parents[1] / ".artifacts" / "soak-logs"
TOPIC = "soak"
PROBE_TOPIC = "soak-probe"
GROUP = "soak"
_CLIENT_ERRORS = (YakError, httpx.HTTPError, OSError)


@dataclass(frozen=True, slots=True)
class SoakOptions:
    duration_s: float = 1800.0
    fault_every_s: float = 300.0
    faults: str | None = None
    rate: float | None = None
    probe_s: float = 15.0
    sample_every_s: float = 5.0
    warmup_s: float = 600.0
    value_size: int = 100
    partitions: int = 6
    drain_timeout_s: float = 120.0
    etcd_flags: tuple[str, ...] = ()
    #: ``YAK_TRACEMALLOC`` frames for brokers and proxies (0: off): their ``/debug/memory`` is
    #: read at the end of the warm-up and at the end of the load (``memory_profile``).
    tracemalloc_frames: int = 0
    results: Path = RESULTS
    plots: Path = PLOTS


@dataclass
class SoakCluster(ChaosCluster):
    """The chaos cluster with ``yak up``'s snapshot count (``yak.etcd_server``: the raft log
    etcd holds in memory is what a soak watches) and extra etcd flags (``--etcd-flag``, later
    ones win): how a soak tries an etcd setting without changing what the chaos suite runs."""

    etcd_flags: tuple[str, ...] = ()

    def _etcd_argv(self, member: str) -> list[str]:
        own = f"--snapshot-count={SNAPSHOT_COUNT}"
        return [*super()._etcd_argv(member), own, *self.etcd_flags]


class Soak:
    """One soak run against a started cluster: the load, the sampler and the faults."""

    def __init__(self, cluster: ChaosCluster, options: SoakOptions, faults: FaultLog) -> None:
        self.cluster = cluster
        self.options = options
        self.faults = faults
        self.t0 = time.monotonic()
        #: Per sequence number: PENDING / ACKED / FAILED, and how often it was consumed.
        self.states = bytearray()
        self.counts = bytearray()
        self.window = Window(0.0)
        self.windows: list[dict[str, Any]] = []
        self.samples: list[ProcessSample] = []
        self.etcd_samples: list[dict[str, Any]] = []
        self.errors: dict[str, int] = {}
        self.draining = False
        self.drained = asyncio.Event()
        self.acked_total = 0
        self.consumed_total = 0
        self._verified = 0

    def now_s(self) -> float:
        return time.monotonic() - self.t0

    def _error(self, where: str, exc: BaseException) -> None:
        key = f"{where}: {type(exc).__name__}"
        self.errors[key] = self.errors.get(key, 0) + 1

    # --- load -----------------------------------------------------------------------------

    def _answered(self, seq: int, sent: float, future: asyncio.Future[RecordMetadata]) -> None:
        if future.cancelled() or future.exception() is not None:
            self.states[seq] = FAILED
            if not future.cancelled():
                self._error("produce", future.exception() or RuntimeError())
            return
        self.states[seq] = ACKED
        self.acked_total += 1
        self.window.produce_ms.append((time.monotonic() - sent) * 1000)

    async def produce(self, producer: AsyncProducer, rate: float, stop: asyncio.Event) -> None:
        """Send ``rate`` records a second until ``stop``; each value is ``seq:send_ns:``
        padded to ``value_size``. A late loop catches up on the schedule."""
        started = time.monotonic()
        pad = self.options.value_size
        while not stop.is_set():
            due = int((time.monotonic() - started) * rate)
            while len(self.states) < due and not stop.is_set():
                seq = len(self.states)
                self.states.append(0)
                value = f"{seq}:{time.time_ns()}:".encode().ljust(pad, b"x")
                sent = time.monotonic()
                try:
                    future = await producer.send(TOPIC, value)
                except _CLIENT_ERRORS as exc:
                    self.states[seq] = FAILED
                    self._error("send", exc)
                    continue
                future.add_done_callback(functools.partial(self._answered, seq, sent))
            await asyncio.sleep(0.005)  # pacing: the next records fall due

    def _consumed(self, value: bytes, now_ns: int) -> None:
        seq_text, sent_text, _ = value.split(b":", 2)
        seq = int(seq_text)
        if seq >= len(self.counts):
            self.counts.extend(bytes(seq + 1 - len(self.counts)))
        self.counts[seq] = min(self.counts[seq] + 1, 255)
        self.window.consumed += 1
        self.consumed_total += 1
        self.window.e2e_ms.append((now_ns - int(sent_text)) / 1e6)

    def _caught_up(self) -> bool:
        """Every acknowledged record consumed (checked once the producer has stopped; the
        cursor keeps what was verified, so each record is looked at about once)."""
        states, counts = self.states, self.counts
        while self._verified < len(states):
            seq = self._verified
            if states[seq] == ACKED and (seq >= len(counts) or not counts[seq]):
                return False
            self._verified += 1
        return True

    async def consume(self, consumer: AsyncConsumer, stop: asyncio.Event) -> None:
        """Poll and commit until ``stop``; set ``drained`` once caught up after the load."""
        last_commit = time.monotonic()
        while not stop.is_set():
            try:
                records = await consumer.poll(timeout_ms=500)
            except _CLIENT_ERRORS as exc:
                self._error("poll", exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.5)
                continue
            now_ns = time.time_ns()
            for record in records:
                self._consumed(bytes(record.value or b""), now_ns)
            if time.monotonic() - last_commit >= 1.0:
                last_commit = time.monotonic()
                try:
                    await consumer.commit()
                except _CLIENT_ERRORS as exc:
                    self._error("commit", exc)
            if self.draining and not records and self._caught_up():
                self.drained.set()

    async def drain(self, stall_s: float, cap_s: float) -> None:
        """Wait for ``drained`` while the consumer makes progress: give up after ``stall_s``
        without a record consumed, or after ``cap_s`` in all. Why not a fixed timeout: a
        consumer left minutes behind by an overloaded machine is slow, not losing records,
        and "lost" must only count what it stopped finding."""
        started = last_progress = time.monotonic()
        seen = self.consumed_total
        while not self.drained.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.drained.wait(), 1.0)
            now = time.monotonic()
            if self.consumed_total != seen:
                seen, last_progress = self.consumed_total, now
            if now - last_progress >= stall_s or now - started >= cap_s:
                self.errors["drain: timeout"] = 1
                return

    # --- observation and faults -------------------------------------------------------------

    def _processes(self) -> Iterator[tuple[str, int]]:
        for name, process in self.cluster.processes.items():
            if process.alive():
                yield name, process.pid
        yield "soak-driver", os.getpid()

    async def sample(self, client: httpx.AsyncClient, *, close_window: bool = True) -> None:
        now = self.now_s()
        for name, pid in self._processes():
            found = read_process(pid)
            if found is not None:
                self.samples.append(ProcessSample(name, pid, now, *found))
        window, self.window = self.window, Window(now)
        if close_window:
            self.windows.append(window.summary(now))
        members = {m: self.cluster.url(m) for m in ETCD_MEMBERS if m not in self.cluster.down}
        self.etcd_samples += await scrape_members(client, members, now)

    async def sampler(self, stop: asyncio.Event) -> None:
        async with httpx.AsyncClient() as client:
            await self.sample(client, close_window=False)
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.options.sample_every_s)
                await self.sample(client)

    async def injector(self, stop: asyncio.Event) -> None:
        """At every multiple of ``fault_every_s`` (a fixed schedule; a fault that overran
        its slot delays the next one only), the next fault of the rotation, healed."""
        number = 0
        started = self.now_s()
        while True:
            number += 1
            due = started + number * self.options.fault_every_s
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(due - self.now_s(), 0.0))
            if stop.is_set():
                return
            entry = await self.faults.inject_next(self.now_s)
            print(f"fault {entry}", flush=True)


async def probe_max_rate(proxy: str, value_size: int, seconds: float) -> dict[str, float]:
    """The acknowledged records/s of one SDK producer going flat out for ``seconds`` (the
    first 2 s are warm-up and not counted)."""
    acked: list[float] = []
    value = b"p" * value_size
    warmup = min(2.0, seconds / 4)
    async with AsyncProducer(proxy, buffer_max_bytes=4 * 1024 * 1024) as producer:
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            future = await producer.send(PROBE_TOPIC, value)
            future.add_done_callback(
                lambda f: None if f.cancelled() or f.exception() else acked.append(time.monotonic())
            )
        await producer.flush()
    counted = [t for t in acked if warmup <= t - started <= seconds]
    return {
        "records_per_s": round(len(counted) / (seconds - warmup), 1),
        "probe_s": seconds,
        "acked": len(acked),
    }


async def _create_topics(cluster: ChaosCluster, partitions: int) -> None:
    for name in (TOPIC, PROBE_TOPIC):
        await cluster.create_topic(name, partitions)
        if not await wait_full_isr(cluster, name, 60.0):
            raise RuntimeError(f"topic {name} not fully replicated within 60 s")


async def run_soak(
    cluster: ChaosCluster, options: SoakOptions, faults: tuple[SoakFault, ...]
) -> dict[str, Any]:
    """The whole soak on a started cluster; the results document."""
    await _create_topics(cluster, options.partitions)
    produce_url, consume_url = cluster.proxy_urls()
    probe: dict[str, float] | None = None
    if options.rate is None:
        probe = await probe_max_rate(produce_url, options.value_size, options.probe_s)
        rate = max(probe["records_per_s"] / 2, 1.0)
        print(f"max produce rate {probe['records_per_s']:.0f} records/s; soaking at {rate:.0f}")
    else:
        rate = options.rate
    log = FaultLog(FaultContext(cluster, cluster.network, TOPIC, cluster.shim), faults)
    soak = Soak(cluster, options, log)
    stop_load, stop_consumer, stop_watch = asyncio.Event(), asyncio.Event(), asyncio.Event()
    async with (
        AsyncProducer(produce_url, linger_ms=5) as producer,
        AsyncConsumer(consume_url, GROUP, [TOPIC], auto_offset_reset="earliest") as consumer,
    ):
        tasks = [
            asyncio.create_task(soak.produce(producer, rate, stop_load)),
            asyncio.create_task(soak.consume(consumer, stop_consumer)),
            asyncio.create_task(soak.sampler(stop_watch)),
        ]
        injector = asyncio.create_task(soak.injector(stop_load))
        profiled = profiled_urls(cluster) if options.tracemalloc_frames else {}
        profile: dict[str, Any] = {}
        async with httpx.AsyncClient() as client:
            if profiled and options.warmup_s < options.duration_s:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop_load.wait(), options.warmup_s)
                profile["baseline_at_s"] = round(soak.now_s(), 1)
                profile["baseline"] = await memory_profiles(client, profiled, top=5)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop_load.wait(), options.duration_s - soak.now_s())
            if profiled:
                profile["end_at_s"] = round(soak.now_s(), 1)
                profile["end"] = await memory_profiles(client, profiled, top=15)
        stop_load.set()
        await asyncio.gather(tasks[0], injector)
        load_s = soak.now_s()
        try:
            await asyncio.wait_for(producer.flush(), options.drain_timeout_s)
        except TimeoutError:
            soak.errors["flush: timeout"] = 1
        soak.draining = True
        drain_started = time.monotonic()
        await soak.drain(options.drain_timeout_s, cap_s=max(options.duration_s, 600.0))
        drain_s = time.monotonic() - drain_started
        stop_consumer.set()
        stop_watch.set()
        await asyncio.gather(*tasks[1:])
    async with httpx.AsyncClient() as client:
        await soak.sample(client)
    document = build_document(
        options=options,
        rate=rate,
        probe=probe,
        load_s=load_s,
        drain_s=drain_s,
        acked_total=soak.acked_total,
        delivery=account_delivery(soak.states, soak.counts),
        faults=log.entries,
        windows=soak.windows,
        samples=soak.samples,
        etcd_samples=soak.etcd_samples,
        errors=soak.errors,
        warmup_s=options.warmup_s,
    )
    if profile:
        document["memory_profile"] = profile
    return document


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM unwinds like Ctrl-C: every process gets stopped


def _parse(argv: list[str] | None) -> SoakOptions:
    parser = argparse.ArgumentParser(prog="python -m loadtest.soak", description=__doc__)
    parser.add_argument("--duration", default="30m", help="load time (e.g. 30m, 20s, 1h)")
    parser.add_argument("--fault-every", "--restart-every", default="5m", help="a fault this often")
    parser.add_argument("--faults", help="comma-separated fault names (default: all, in turn)")
    parser.add_argument("--rate", type=float, help="records/s (default: half the probed max)")
    parser.add_argument("--probe", default="15s", help="how long the max-rate probe runs")
    parser.add_argument("--sample-every", default="5s", help="sampling interval")
    parser.add_argument(
        "--warmup", default="10m", help="slopes are also fitted on the samples after this"
    )
    parser.add_argument("--value-size", type=int, default=100, help="bytes per record")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument(
        "--drain-timeout",
        default="2m",
        help="after the load, give up on the consumer once it consumed nothing for this long",
    )
    parser.add_argument(
        "--etcd-flag", action="append", default=[], help="an extra flag for every etcd member"
    )
    parser.add_argument(
        "--tracemalloc",
        type=int,
        default=0,
        metavar="FRAMES",
        help="trace brokers' and proxies' Python allocations (YAK_TRACEMALLOC) and record "
        "which sites grew between the end of the warm-up and the end of the load",
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="the JSON document")
    parser.add_argument("--plots", type=Path, default=PLOTS, help="folder of soak-*.png")
    args = parser.parse_args(argv)
    options = SoakOptions(
        duration_s=parse_duration(args.duration),
        fault_every_s=parse_duration(args.fault_every),
        faults=args.faults,
        rate=args.rate,
        probe_s=parse_duration(args.probe),
        sample_every_s=parse_duration(args.sample_every),
        warmup_s=parse_duration(args.warmup),
        value_size=args.value_size,
        partitions=args.partitions,
        drain_timeout_s=parse_duration(args.drain_timeout),
        etcd_flags=tuple(args.etcd_flag),
        tracemalloc_frames=args.tracemalloc,
        results=args.results,
        plots=args.plots,
    )
    try:
        choose_faults(options.faults)
    except ValueError as exc:
        parser.error(str(exc))
    return options


def main(argv: list[str] | None = None) -> int:
    options = _parse(argv)
    faults = choose_faults(options.faults)
    signal.signal(signal.SIGTERM, _interrupt)
    folder = Path(tempfile.mkdtemp(prefix="yak-soak-"))
    if options.tracemalloc_frames:  # inherited by every service the cluster starts
        os.environ[MEMORY_ENV] = str(options.tracemalloc_frames)
    network = LoopbackNetwork()
    cluster: SoakCluster | None = None
    try:
        shim = None
        if any(f.shim for f in faults):
            shim = Shim(build_shim(folder), folder / "shim-control")
        cluster = SoakCluster(
            folder,
            network,
            f"soak-{uuid.uuid4().hex[:8]}",
            shim=shim,
            etcd_list=True,
            etcd_flags=options.etcd_flags,
        )
        cluster.start_all()
        document = asyncio.run(run_soak(cluster, options, faults))
    finally:
        if cluster is not None:
            cluster.stop()
        network.close()
        if (folder / "logs").is_dir():  # every process's log, kept for a post-mortem
            shutil.rmtree(LOGS, ignore_errors=True)
            shutil.copytree(folder / "logs", LOGS)
        shutil.rmtree(folder, ignore_errors=True)
    options.results.parent.mkdir(parents=True, exist_ok=True)
    options.results.write_text(json.dumps(document, indent=2) + "\n")
    plots = plot_soak(document, options.plots)
    print_summary(document)
    print(f"results: {options.results}; plots: {', '.join(str(p) for p in plots)}")
    return 0 if document["delivery"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
