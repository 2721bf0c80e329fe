"""The idle back-to-back rows (issue 34): one record a request on one connection with no pause
between requests — what the client and the server cost per request when nothing else runs and
nothing waits for a timer. Beside the paced idle rows (2 ms apart, ``loadtest.latency.measure``).

- ``b2b_proxy``: ``POST /api/v1/topics/{t}/records?acks=1`` to a topic of RF 1 through the
  rest-proxy, from the lean client (``loadtest.latency.lean_http``), the request's bytes built
  once (path ``proxy_b2b``);
- ``b2b_redis``: ``XADD`` from ``redis.asyncio`` with hiredis, the fields built once (path
  ``xadd_b2b``).

Each takes ``warmup`` unmeasured requests, then ``samples`` measured; exact percentiles.
"""

from __future__ import annotations

import time

from redis.asyncio import Redis

from loadtest.latency.lean_http import LeanConnection, LeanPool
from loadtest.latency.measure import VALUE_BYTES, IdleSettings
from loadtest.latency.rows import Row, latency_row
from loadtest.peers.drivers.base import make_payload
from loadtest.peers.drivers.yak_rest import produce_body

__all__ = ["b2b_proxy", "b2b_redis"]


async def b2b_proxy(system: str, proxy_url: str, topic: str, settings: IdleSettings) -> Row:
    """RF 1, acks=1 back to back through the proxy (see the module docstring)."""
    pool = LeanPool(proxy_url)
    head = pool.head("POST", f"/api/v1/topics/{topic}/records?acks=1", "application/json")
    body = produce_body([(None, make_payload(VALUE_BYTES, time.monotonic_ns()))])
    connection = await LeanConnection.open(pool.host, pool.port)
    samples: list[float] = []
    errors = 0
    try:
        for index in range(settings.warmup + settings.samples):
            started = time.perf_counter_ns()
            status, _ = await connection.request(head, body)
            elapsed_ms = (time.perf_counter_ns() - started) / 1e6
            if status != 200:
                errors += 1
            elif index >= settings.warmup:
                samples.append(elapsed_ms)
    finally:
        connection.close()
    return latency_row(system, "proxy_b2b", 1, "1", samples, errors=errors)


async def b2b_redis(url: str, settings: IdleSettings, stream: str = "lat-b2b") -> Row:
    """XADD back to back on one connection (see the module docstring)."""
    redis = Redis.from_url(url, single_connection_client=True)
    fields = {b"p": make_payload(VALUE_BYTES, time.monotonic_ns())}
    samples: list[float] = []
    try:
        await redis.delete(stream)
        for index in range(settings.warmup + settings.samples):
            started = time.perf_counter_ns()
            await redis.xadd(stream, fields)  # type: ignore[arg-type]
            elapsed_ms = (time.perf_counter_ns() - started) / 1e6
            if index >= settings.warmup:
                samples.append(elapsed_ms)
        await redis.delete(stream)
    finally:
        await redis.aclose()
    return latency_row("redis", "xadd_b2b", 1, None, samples)
