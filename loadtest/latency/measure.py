"""The measurements the latency benchmark makes from its own process.

- ``idle_proxy``: one record a request to ``POST /api/v1/topics/{t}/records?acks=…`` on one
  connection, one request at a time (the peers' 1 KiB JSON payload as the value), with the
  lean client (``http1``: httptools' C parser, as the Redis rows use hiredis) and with ``httpx``;
- ``idle_redis``: one ``XADD`` at a time from ``redis.asyncio`` (hiredis parsing) on one
  connection, the same payload in field ``p`` (as the peers' Redis driver);
- ``end_to_end``: the peers harness's ``Runner`` at a fixed rate — batches paced every 5 ms,
  the payload carrying ``time.monotonic_ns()``, one consumer-group member (Yak: native
  long-poll ``GET …/records``; Redis: ``XREADGROUP BLOCK`` + ``XACK``) — over one topic of
  ``E2E_PARTITIONS`` partitions (RF 3, acks=all for Yak);
- ``scrape_stages``: the stage histograms of the services' ``/metrics``, summed (the budget
  per hop: ``idle_proxy`` and ``end_to_end`` take a hook around their measured part);
- ``cpu_phase``: a fixed number of records, ``CPU_CLIENTS`` concurrent clients each posting
  ``CPU_RECORDS_PER_REQUEST`` records per request (acks=all) as fast as they are answered,
  with the CPU seconds of the given processes read from ``/proc`` before and after.

Each idle measurement has ``warmup`` unmeasured requests first and sleeps ``interval_s``
between requests, so every request finds the system idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
from redis.asyncio import Redis

from loadtest.latency.cpu import CpuPhase, cpu_seconds_of_stat
from loadtest.latency.histograms import Histograms, add_histograms, stage_histograms
from loadtest.latency.http1 import Http1
from loadtest.latency.rows import Row, latency_row
from loadtest.peers.drivers.base import Driver, make_payload
from loadtest.peers.drivers.yak_rest import produce_body
from loadtest.peers.runner import MeasureHook, Runner, no_hook
from loadtest.peers.workload import Workload

__all__ = [
    "CPU_CLIENTS",
    "CPU_RECORDS_PER_REQUEST",
    "E2E_PARTITIONS",
    "VALUE_BYTES",
    "IdleHook",
    "IdleSettings",
    "cpu_phase",
    "cpu_seconds",
    "end_to_end",
    "idle_proxy",
    "idle_redis",
    "no_idle_hook",
    "scrape_stages",
    "wait_until_producible",
]

VALUE_BYTES = 1024
E2E_PARTITIONS = 16
CPU_CLIENTS = 8
CPU_RECORDS_PER_REQUEST = 500
REQUEST_TIMEOUT_S = 30.0
_JSON = {"content-type": "application/json"}
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class IdleSettings:
    samples: int = 300
    warmup: int = 50
    interval_s: float = 0.002


#: Wraps the measured requests of one idle row (after its warm-up), given its RF and acks.
IdleHook = Callable[[int, str], AbstractAsyncContextManager[None]]


@contextlib.asynccontextmanager
async def no_idle_hook(_rf: int, _acks: str) -> AsyncIterator[None]:
    yield


def _one_record_body() -> bytes:
    return produce_body([(None, make_payload(VALUE_BYTES, time.monotonic_ns()))])


async def wait_until_producible(proxy_url: str, topic: str, timeout_s: float = 60.0) -> None:
    """Until the proxy accepts a record for ``topic`` (its metadata cache has the topic and
    every partition a leader); TimeoutError naming the last answer after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    async with httpx.AsyncClient(base_url=proxy_url, timeout=5.0) as http:
        while time.monotonic() < deadline:
            try:
                response = await http.post(
                    f"/api/v1/topics/{topic}/records",
                    content=_one_record_body(),
                    params={"acks": "all"},
                    headers=_JSON,
                )
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__} {exc}".strip()
            else:
                if response.status_code == 200:
                    return
                last = f"{response.status_code} {response.text[:200]}"
            await asyncio.sleep(0.1)  # another process's state: nothing local to wait on
    raise TimeoutError(f"the proxy does not take records for {topic} within {timeout_s} s: {last}")


async def idle_proxy(
    system: str,
    proxy_url: str,
    topics: Mapping[int, str],
    settings: IdleSettings,
    hook: IdleHook = no_idle_hook,
) -> list[Row]:
    """A row per (replication factor → topic of ``topics``) and acks 0, 1, all, measured with
    the lean client (path ``proxy``, ``http1.Http1``: the Redis rows' client shape) and again
    with ``httpx`` (path ``proxy_httpx``); ``hook(rf, acks)`` is entered after each lean row's
    warm-up and left after its last measured request."""
    rows = []
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with (
        Http1(proxy_url) as lean,
        httpx.AsyncClient(base_url=proxy_url, timeout=REQUEST_TIMEOUT_S, limits=limits) as http,
    ):

        async def one_lean(topic: str, acks: str) -> float | None:
            body = _one_record_body()
            started = time.perf_counter_ns()
            try:
                status, _ = await asyncio.wait_for(
                    lean.request("POST", f"/api/v1/topics/{topic}/records?acks={acks}", body),
                    REQUEST_TIMEOUT_S,
                )
                ok = status == 200
            except (OSError, TimeoutError):
                ok = False
            elapsed_ms = (time.perf_counter_ns() - started) / 1e6
            await asyncio.sleep(settings.interval_s)
            return elapsed_ms if ok else None

        async def one_httpx(topic: str, acks: str) -> float | None:
            body = _one_record_body()
            started = time.perf_counter_ns()
            try:
                response = await http.post(
                    f"/api/v1/topics/{topic}/records",
                    content=body,
                    params={"acks": acks},
                    headers=_JSON,
                )
                ok = response.status_code == 200
            except httpx.HTTPError:
                ok = False
            elapsed_ms = (time.perf_counter_ns() - started) / 1e6
            await asyncio.sleep(settings.interval_s)
            return elapsed_ms if ok else None

        for path, one in (("proxy", one_lean), ("proxy_httpx", one_httpx)):
            for rf, topic in sorted(topics.items()):
                for acks in ("0", "1", "all"):
                    samples: list[float] = []
                    errors = 0
                    for _ in range(settings.warmup):
                        errors += await one(topic, acks) is None
                    scope = hook(rf, acks) if path == "proxy" else no_idle_hook(rf, acks)
                    async with scope:
                        for _ in range(settings.samples):
                            elapsed_ms = await one(topic, acks)
                            if elapsed_ms is None:
                                errors += 1
                            else:
                                samples.append(elapsed_ms)
                    rows.append(latency_row(system, path, rf, acks, samples, errors=errors))
    return rows


async def idle_redis(url: str, settings: IdleSettings, stream: str = "lat-idle") -> Row:
    """One XADD at a time on one connection (see the module docstring)."""
    redis = Redis.from_url(url, single_connection_client=True)
    samples: list[float] = []
    try:
        await redis.delete(stream)
        for index in range(settings.warmup + settings.samples):
            fields = {b"p": make_payload(VALUE_BYTES, time.monotonic_ns())}
            started = time.perf_counter_ns()
            await redis.xadd(stream, fields)  # type: ignore[arg-type]
            elapsed_ms = (time.perf_counter_ns() - started) / 1e6
            if index >= settings.warmup:
                samples.append(elapsed_ms)
            await asyncio.sleep(settings.interval_s)
        await redis.delete(stream)
    finally:
        await redis.aclose()
    return latency_row("redis", "xadd", 1, None, samples)


async def end_to_end(
    system: str,
    driver: Driver,
    rate: int,
    *,
    rf: int | None,
    acks: str | None,
    warmup_s: float,
    duration_s: float,
    measure_hook: MeasureHook = no_hook,
    path: str = "e2e",
) -> Row:
    """The peers ``Runner`` at ``rate`` msg/s of 1 KiB records (see the module docstring);
    ``measure_hook`` wraps the measured part (after the warm-up); the row's ``path``."""
    workload = Workload(
        f"latency-e2e-{rate}",
        partitions_per_topic=E2E_PARTITIONS,
        message_size=VALUE_BYTES,
        producer_rate=rate,
        duration_s=duration_s,
        warmup_s=warmup_s,
    )
    result = await Runner(driver, workload, measure_hook=measure_hook).run()
    e2e = result.e2e_latency
    return Row(
        system,
        path,
        rf,
        acks,
        p50=e2e.p50,
        p90=e2e.p90,
        p99=e2e.p99,
        samples=e2e.samples,
        p999=e2e.p999,
        max=e2e.max,
        rate=rate,
        errors=result.errors,
        ack_p50=result.publish_latency.p50,
        ack_p99=result.publish_latency.p99,
    )


async def scrape_stages(urls: Sequence[str], timeout_s: float = 10.0) -> Histograms:
    """The stage histograms of every service at ``urls`` (``GET <url>/metrics``, all at
    once), summed series by series; httpx.HTTPError if a scrape fails."""
    async with httpx.AsyncClient(timeout=timeout_s) as http:

        async def scrape(url: str) -> Histograms:
            response = await http.get(f"{url}/metrics")
            response.raise_for_status()
            return stage_histograms(response.text)

        return add_histograms(*await asyncio.gather(*(scrape(url) for url in urls)))


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    return cpu_seconds_of_stat(Path(f"/proc/{pid}/stat").read_text(), _TICKS_PER_S)


async def cpu_phase(
    build: str,
    proxy_url: str,
    topic: str,
    pids: Mapping[str, int],
    counted: tuple[str, ...],
    *,
    records: int,
    warmup_requests: int,
) -> CpuPhase:
    """``records`` records (rounded up to whole requests) at the maximum rate; CPU seconds of
    every process of ``pids`` over the measured part (see the module docstring)."""
    payload = make_payload(VALUE_BYTES, time.monotonic_ns())
    body = produce_body([(None, payload)] * CPU_RECORDS_PER_REQUEST)
    requests = -(-records // CPU_RECORDS_PER_REQUEST)
    limits = httpx.Limits(max_connections=CPU_CLIENTS)
    phase = CpuPhase(build, 0, 0, 0, 0.0, counted=counted)
    async with httpx.AsyncClient(
        base_url=proxy_url, timeout=REQUEST_TIMEOUT_S, limits=limits
    ) as http:
        left = 0

        async def client(measured: bool) -> None:
            nonlocal left
            while left > 0:
                left -= 1
                try:
                    response = await http.post(
                        f"/api/v1/topics/{topic}/records",
                        content=body,
                        params={"acks": "all"},
                        headers=_JSON,
                    )
                except httpx.HTTPError:
                    phase.failed_requests += int(measured)
                    continue
                if response.status_code != 200:
                    phase.failed_requests += int(measured)
                    continue
                results = orjson.loads(response.content)["results"]
                ok = sum(1 for r in results if r.get("error") is None)
                if measured:
                    phase.records += ok
                    phase.errors += len(results) - ok

        left = warmup_requests
        await asyncio.gather(*(client(False) for _ in range(CPU_CLIENTS)))
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        started = time.perf_counter()
        left = requests
        await asyncio.gather(*(client(True) for _ in range(CPU_CLIENTS)))
        phase.elapsed_s = time.perf_counter() - started
        after = {name: cpu_seconds(pid) for name, pid in pids.items()}
    phase.cpu_s = {name: after[name] - before[name] for name in pids}
    return phase
