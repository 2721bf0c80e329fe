"""A service's Prometheus registry and its ``GET /metrics`` route.

Each app gets its own ``ServiceMetrics`` (no module-level registry: tests run several apps in
one process). It holds what every service exports:

- ``yak_http_request_duration_seconds`` (histogram; service, route, method, status): observed
  by ``yak.observability.http.ObservabilityMiddleware``; ``route`` is the route's template
  (``/topics/{topic}``), never the raw path;
- ``yak_etcd_request_duration_seconds`` (histogram; service, operation, result): observed by
  the etcd adapter (``EtcdMetadataStore(observer=metrics.observe_etcd)``);
- ``process_*`` and ``python_*``: prometheus-client's process, platform and GC collectors
  (resident memory, open fds, CPU seconds, start time);
- ``yak_gc_pause_seconds`` and ``yak_event_loop_lag_seconds`` (``yak.observability.runtime``):
  the collector's pauses, and how late the event loop runs a timer while the service's
  lifespan holds ``loop_lag.running()``.

Services register their own metrics and collectors on ``registry``. What needs I/O (an etcd
read) goes in a ``before_scrape`` hook, awaited on the event loop by ``/metrics``; then the
text is rendered on a worker thread, as prometheus-client's own threaded exporters do: a
broker's collector walks 20,000 replicas in ~80 ms, which on the loop stalled everything else
for that long at every scrape, where on a thread the loop gets the GIL back at each switch
interval (5 ms). So a collector's ``collect`` runs off the loop: it only reads in-memory
state, and copies a mutable container before it iterates it in Python (``list(d.values())``
is one C call, atomic under the GIL; a ``for`` over a dict the loop resizes is not).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Histogram,
    generate_latest,
)
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from yak.observability.runtime import GcPauses, LoopLagMonitor

__all__ = ["METRICS_PATH", "STAGE_BUCKETS", "ServiceMetrics", "metrics_route"]

_log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
#: HTTP latency buckets: sub-millisecond health checks up to 30 s long polls.
HTTP_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
ETCD_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)
#: Latency-budget stage buckets (``yak_*_stage_seconds``): 50 µs (an append to the page cache,
#: a parse of a few records) to 5 s (a parked long poll, a slow ISR).
STAGE_BUCKETS = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0,
)  # fmt: skip


class ServiceMetrics:
    """The registry of one service instance and the metrics every service has."""

    def __init__(self, service: str) -> None:
        self.service = service
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        GcPauses.shared().register(self.registry, service)
        self.loop_lag = LoopLagMonitor(self.registry, service)
        self.http_duration = Histogram(
            "yak_http_request_duration_seconds",
            "Time from a request's arrival to the end of its response, by route template.",
            ["service", "route", "method", "status"],
            buckets=HTTP_BUCKETS,
            registry=self.registry,
        )
        self.etcd_duration = Histogram(
            "yak_etcd_request_duration_seconds",
            "Latency of calls to etcd (unary calls; a watch is timed until it is created).",
            ["service", "operation", "result"],
            buckets=ETCD_BUCKETS,
            registry=self.registry,
        )
        self.before_scrape: list[Callable[[], Awaitable[None]]] = []

    def observe_etcd(self, operation: str, seconds: float, ok: bool) -> None:
        """The etcd adapter's observer: one call took ``seconds``."""
        result = "ok" if ok else "error"
        operation = operation.replace(" ", "_")  # "lease keep-alive" -> "lease_keep-alive"
        self.etcd_duration.labels(self.service, operation, result).observe(seconds)

    async def render(self) -> bytes:
        """Run the ``before_scrape`` hooks, then the text exposition of every metric."""
        for hook in self.before_scrape:
            try:
                await hook()
            except Exception:  # a failed refresh leaves stale values, never a failed scrape
                _log.exception("refreshing metrics before a scrape failed")
        return await asyncio.to_thread(generate_latest, self.registry)


def metrics_route(metrics: ServiceMetrics) -> Route:
    """``GET /metrics``: a plain Starlette route (no FastAPI dependencies, so no auth guard),
    left out of the OpenAPI documents and the route-ACL tables like ``/openapi.json``."""

    async def endpoint(_request: Request) -> Response:
        return Response(await metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return Route(METRICS_PATH, endpoint, methods=["GET"], name="metrics", include_in_schema=False)
