"""``make soak``: a local cluster under steady load for a long time, brokers restarted on a
schedule; does anything leak, slow down or lose records?

1. Starts etcd, a coordinator, 3 brokers and a rest-proxy (``loadtest.local_cluster``, leases
   of 2 s) and a topic of ``--partitions`` partitions, RF 3, ``min.insync.replicas=2``.
2. Measures the highest acknowledged produce rate through the proxy for ``--probe`` seconds
   (the SDK's idempotent producer, acks=all, as fast as it goes, on a topic of its own), or
   takes ``--rate``.
3. For ``--duration`` (default 30 min) produces at half that rate through the proxy
   (records numbered, stamped with their send time) while a consumer group reads everything
   through the same proxy and commits every second. Every ``--restart-every`` (default
   5 min) one broker, round robin, is stopped — SIGTERM (controlled shutdown) and kill -9
   alternately — and started again on the same data folder.
4. Every ``--sample-every`` seconds: each process's resident memory and open file
   descriptors (``/proc``), and the window's produce latency (send to acknowledgement) and
   end-to-end latency (send to consumption) percentiles and rates.
5. At the end it stops producing, waits for the consumer to catch up, and checks that every
   acknowledged record was consumed (lost ones fail the run; duplicates are counted apart).

Writes ``loadtest/results/soak.json`` (slopes per process: RSS MB/hour and fds/hour, each
incarnation fitted on its own; p99 latency ms/hour; the delivery account; every window) and
plots ``docs/benchmarks/soak-*.png``; ``--results``/``--plots`` put them elsewhere. Exit
code 1 when a record was lost. ``docs/soak.md`` says how to read it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import functools
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

from loadtest.local_cluster import LocalCluster, local_cluster, start_etcd, wait_for
from loadtest.soak_plots import plot_soak
from loadtest.soak_stats import (
    ACKED,
    FAILED,
    Delivery,
    ProcessSample,
    account_delivery,
    parse_duration,
    per_hour,
    percentile,
    process_slopes,
)
from yak.clients.admin import AdminClient
from yak.errors import YakError
from yak.sdk import AsyncConsumer, AsyncProducer, RecordMetadata
from yak.supervisor import StartupError

__all__ = ["SoakOptions", "main", "run_soak"]

RESULTS = Path(__file__).parent / "results" / "soak.json"
PLOTS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"
LOGS = Path(__file__).resolve().parents[1] / ".artifacts" / "soak-logs"
TOPIC = "soak"
PROBE_TOPIC = "soak-probe"
GROUP = "soak"
#: Attempts to start a stopped broker again before the soak goes on without it.
RESTART_ATTEMPTS = 3
_CLIENT_ERRORS = (YakError, httpx.HTTPError, OSError)


@dataclass(frozen=True, slots=True)
class SoakOptions:
    duration_s: float = 1800.0
    restart_every_s: float = 300.0
    rate: float | None = None
    probe_s: float = 15.0
    sample_every_s: float = 5.0
    value_size: int = 100
    partitions: int = 6
    drain_timeout_s: float = 120.0
    results: Path = RESULTS
    plots: Path = PLOTS


@dataclass
class _Window:
    """What happened between two samples."""

    start_s: float
    produce_ms: list[float] = field(default_factory=list)
    e2e_ms: list[float] = field(default_factory=list)
    consumed: int = 0

    def summary(self, end_s: float) -> dict[str, Any]:
        span = max(end_s - self.start_s, 1e-9)

        def ms(values: list[float], q: float) -> float | None:
            found = percentile(values, q)
            return None if found is None else round(found, 2)

        return {
            "start_s": round(self.start_s, 2),
            "end_s": round(end_s, 2),
            "acked_per_s": round(len(self.produce_ms) / span, 1),
            "consumed_per_s": round(self.consumed / span, 1),
            "produce_p50_ms": ms(self.produce_ms, 50),
            "produce_p99_ms": ms(self.produce_ms, 99),
            "e2e_p50_ms": ms(self.e2e_ms, 50),
            "e2e_p99_ms": ms(self.e2e_ms, 99),
            "e2e_p999_ms": ms(self.e2e_ms, 99.9),
        }


def read_process(pid: int) -> tuple[float, int] | None:
    """(resident MB, open fds) of a live process from ``/proc``; None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024, fds
    return None


class Soak:
    """One soak run against a started cluster: the load, the sampler and the restarts."""

    def __init__(self, cluster: LocalCluster, options: SoakOptions) -> None:
        self.cluster = cluster
        self.options = options
        self.proxy = cluster.proxy_url(0)
        self.t0 = time.monotonic()
        #: Per sequence number: PENDING / ACKED / FAILED, and how often it was consumed.
        self.states = bytearray()
        self.counts = bytearray()
        self.window = _Window(0.0)
        self.windows: list[dict[str, Any]] = []
        self.samples: list[ProcessSample] = []
        self.restarts: list[dict[str, Any]] = []
        self.errors: dict[str, int] = {}
        self.draining = False
        self.drained = asyncio.Event()
        self.acked_total = 0
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

    # --- observation and faults -------------------------------------------------------------

    def _processes(self) -> Iterator[tuple[str, int]]:
        if self.cluster.etcd.pid is not None:
            yield "etcd", self.cluster.etcd.pid
        for process in self.cluster.supervisor.processes:
            if process.alive():
                yield process.spec.name, process.pid
        yield "soak-driver", os.getpid()

    def sample(self, *, close_window: bool = True) -> None:
        now = self.now_s()
        for name, pid in self._processes():
            found = read_process(pid)
            if found is not None:
                self.samples.append(ProcessSample(name, pid, now, found[0], found[1]))
        window, self.window = self.window, _Window(now)
        if close_window:
            self.windows.append(window.summary(now))

    async def sampler(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.options.sample_every_s)
            self.sample()

    async def restarter(self, stop: asyncio.Event) -> None:
        """At every multiple of ``restart_every_s``: stop the next broker (SIGTERM, then
        kill -9 the next time) and start it again on the same folder, id and port."""
        number = 0
        started = self.now_s()
        while True:
            due = started + (number + 1) * self.options.restart_every_s  # a fixed schedule
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(due - self.now_s(), 0.0))
            if stop.is_set():
                return
            broker_id = number % len(self.cluster.brokers)
            how = signal.SIGTERM if number % 2 == 0 else signal.SIGKILL
            number += 1
            process = self.cluster.brokers[broker_id]
            began = self.now_s()
            process.popen.send_signal(how)
            code = await asyncio.to_thread(process.popen.wait)
            stopped = self.now_s()
            failures = await self._start_again(broker_id)
            self.restarts.append(
                {
                    "t_s": round(began, 2),
                    "broker": broker_id,
                    "signal": how.name,
                    "exit_code": code,
                    "stop_s": round(stopped - began, 2),
                    "down_s": round(self.now_s() - began, 2),
                    "failed_starts": failures,
                }
            )

    async def _start_again(self, broker_id: int) -> list[str]:
        """Start the broker again, up to ``RESTART_ATTEMPTS`` times; the failed attempts'
        messages (with the log's tail), so a broker that stays down is seen and explained."""
        failures: list[str] = []
        for _ in range(RESTART_ATTEMPTS):
            try:
                await asyncio.to_thread(self.cluster.start_broker, broker_id)
                return failures
            except StartupError as exc:
                self._error("restart", exc)
                failures.append(str(exc)[-4000:])
                for process in self.cluster.supervisor.processes:  # one that is not ready yet
                    if process.spec.name == f"broker-{broker_id}" and process.alive():
                        process.popen.kill()
                        await asyncio.to_thread(process.popen.wait)
        return failures


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


def _latency_slopes(windows: list[dict[str, Any]]) -> dict[str, float | None]:
    xs = [w["end_s"] for w in windows]
    out: dict[str, float | None] = {}
    for key in ("produce_p99_ms", "e2e_p99_ms"):
        slope = per_hour(xs, [w[key] for w in windows])
        out[f"{key}_per_hour"] = None if slope is None else round(slope, 2)
    return out


def _overall(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    found = percentile(present, 50)
    return None if found is None else round(found, 2)


async def _create_topics(cluster: LocalCluster, partitions: int) -> None:
    async with AdminClient(cluster.coordinator_url) as admin:
        for name in (TOPIC, PROBE_TOPIC):
            await admin.create_topic(
                name,
                partitions=partitions,
                replication_factor=3,
                configs={"min.insync.replicas": "2"},
            )
            await wait_for(admin, name, "full-isr")


async def run_soak(cluster: LocalCluster, options: SoakOptions) -> dict[str, Any]:
    """The whole soak on a started cluster (3 brokers, a proxy); the results document."""
    await _create_topics(cluster, options.partitions)
    proxy = cluster.proxy_url(0)
    probe: dict[str, float] | None = None
    if options.rate is None:
        probe = await probe_max_rate(proxy, options.value_size, options.probe_s)
        rate = max(probe["records_per_s"] / 2, 1.0)
        print(f"max produce rate {probe['records_per_s']:.0f} records/s; soaking at {rate:.0f}")
    else:
        rate = options.rate
    soak = Soak(cluster, options)
    stop_load, stop_consumer, stop_watch = asyncio.Event(), asyncio.Event(), asyncio.Event()
    async with (
        AsyncProducer(proxy, linger_ms=5) as producer,
        AsyncConsumer(proxy, GROUP, [TOPIC], auto_offset_reset="earliest") as consumer,
    ):
        soak.sample(close_window=False)
        tasks = [
            asyncio.create_task(soak.produce(producer, rate, stop_load)),
            asyncio.create_task(soak.consume(consumer, stop_consumer)),
            asyncio.create_task(soak.sampler(stop_watch)),
        ]
        restarter = asyncio.create_task(soak.restarter(stop_load))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop_load.wait(), options.duration_s)
        stop_load.set()
        await asyncio.gather(tasks[0], restarter)
        load_s = soak.now_s()
        try:
            await asyncio.wait_for(producer.flush(), options.drain_timeout_s)
        except TimeoutError:
            soak.errors["flush: timeout"] = 1
        soak.draining = True
        drain_started = time.monotonic()
        try:
            await asyncio.wait_for(soak.drained.wait(), options.drain_timeout_s)
        except TimeoutError:
            soak.errors["drain: timeout"] = 1
        drain_s = time.monotonic() - drain_started
        stop_consumer.set()
        stop_watch.set()
        await asyncio.gather(*tasks[1:])
    soak.sample()
    delivery = account_delivery(soak.states, soak.counts)
    return _document(soak, options, rate, probe, load_s, drain_s, delivery)


def _document(
    soak: Soak,
    options: SoakOptions,
    rate: float,
    probe: dict[str, float] | None,
    load_s: float,
    drain_s: float,
    delivery: Delivery,
) -> dict[str, Any]:
    windows = [w for w in soak.windows if w["start_s"] < load_s]  # not the drain's
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(options).items()}
    return {
        "benchmark": "soak",
        "finished_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "options": settings,
        "max_rate_probe": probe,
        "target_rate_per_s": round(rate, 1),
        "load_s": round(load_s, 1),
        "drain_s": round(drain_s, 1),
        "acked_per_s": round(soak.acked_total / max(load_s, 1e-9), 1),
        "restarts": soak.restarts,
        "delivery": {**asdict(delivery), "ok": delivery.ok},
        "processes": process_slopes(soak.samples),
        "latency": {
            **_latency_slopes(windows),
            "produce_p99_ms_median_window": _overall([w["produce_p99_ms"] for w in windows]),
            "e2e_p99_ms_median_window": _overall([w["e2e_p99_ms"] for w in windows]),
            "e2e_p99_ms_worst_window": max(
                (w["e2e_p99_ms"] for w in windows if w["e2e_p99_ms"] is not None), default=None
            ),
        },
        "errors": soak.errors,
        "windows": windows,
        "samples": [asdict(s) for s in soak.samples],
    }


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM unwinds like Ctrl-C: every process gets stopped


def _parse(argv: list[str] | None) -> SoakOptions:
    parser = argparse.ArgumentParser(prog="python -m loadtest.soak", description=__doc__)
    parser.add_argument("--duration", default="30m", help="load time (e.g. 30m, 20s, 1h)")
    parser.add_argument("--restart-every", default="5m", help="a broker restart this often")
    parser.add_argument("--rate", type=float, help="records/s (default: half the probed max)")
    parser.add_argument("--probe", default="15s", help="how long the max-rate probe runs")
    parser.add_argument("--sample-every", default="5s", help="sampling interval")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per record")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--drain-timeout", default="2m", help="wait for the consumer this long")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the JSON document")
    parser.add_argument("--plots", type=Path, default=PLOTS, help="folder of soak-*.png")
    args = parser.parse_args(argv)
    return SoakOptions(
        duration_s=parse_duration(args.duration),
        restart_every_s=parse_duration(args.restart_every),
        rate=args.rate,
        probe_s=parse_duration(args.probe),
        sample_every_s=parse_duration(args.sample_every),
        value_size=args.value_size,
        partitions=args.partitions,
        drain_timeout_s=parse_duration(args.drain_timeout),
        results=args.results,
        plots=args.plots,
    )


def _print_summary(document: dict[str, Any]) -> None:
    delivery = document["delivery"]
    print(
        f"load {document['load_s']:.0f} s at {document['target_rate_per_s']:.0f} records/s "
        f"(acked {document['acked_per_s']:.0f}/s), {len(document['restarts'])} broker restarts"
    )
    print(
        f"acked {delivery['acked']}, consumed {delivery['consumed_unique']} distinct "
        f"({delivery['duplicates']} duplicates), lost {delivery['lost']}, "
        f"failed sends {delivery['failed_sends']}"
    )
    for name, slopes in sorted(document["processes"].items()):
        print(f"  {name:<14} RSS {slopes['rss_mb_per_hour']} MB/h, fds {slopes['fds_per_hour']}/h")
    print(f"  latency {document['latency']}")
    for restart in document["restarts"]:
        for failure in restart.get("failed_starts", ()):
            print(f"  broker-{restart['broker']} failed to start at {restart['t_s']} s:")
            print("    " + "\n    ".join(failure.splitlines()[-12:]))


def main(argv: list[str] | None = None) -> int:
    options = _parse(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    with tempfile.TemporaryDirectory(prefix="yak-soak-") as folder:
        root = Path(folder)
        etcd = start_etcd(root)
        try:
            with local_cluster(root, etcd, "soak", brokers=3) as cluster:
                cluster.start_proxy(0)
                document = asyncio.run(run_soak(cluster, options))
        finally:
            etcd.stop()
            if (root / "logs").is_dir():  # every process's log, kept for a post-mortem
                shutil.rmtree(LOGS, ignore_errors=True)
                shutil.copytree(root / "logs", LOGS)
    options.results.parent.mkdir(parents=True, exist_ok=True)
    options.results.write_text(json.dumps(document, indent=2) + "\n")
    plots = plot_soak(document, options.plots)
    _print_summary(document)
    print(f"results: {options.results}; plots: {', '.join(str(p) for p in plots)}")
    return 0 if document["delivery"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
