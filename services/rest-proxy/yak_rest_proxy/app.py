"""The rest-proxy service's app factory.

The rest-proxy is the public face of Yak: the Confluent REST Proxy v2-compatible API at the
root (``/topics``, ``/consumers``, ``/brokers``) and the native API under ``/api/v1``, both
served from one FastAPI app whose OpenAPI document covers every route. It keeps no durable
state (``runtime.ProxyRuntime``): anything a client relies on lives in etcd or on the brokers,
so any proxy serves any client; the consumer instances it serves are held in memory and
written behind (``consume.holding.members``), handed over when another proxy asks for one. With
``YAK_SECURITY=on`` every route but the health checks and the OpenAPI docs goes through the
guard (``security.guard``): a credential, then the route's ACL checks from
``security.route_acls``. ``/metrics`` (docs/observability.md) is a plain route outside the
guard, public like the health checks; the observability middleware, outermost, times every
request and gives it its ``X-Request-Id``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from yak import __version__
from yak.clients.broker import BrokerClient
from yak.clock import Clock
from yak.metadata.store import MetadataStore
from yak.observability.http import ObservabilityMiddleware
from yak.observability.memory import memory_router, start_from_env
from yak.observability.metrics import ServiceMetrics, metrics_route
from yak.web.direct import DirectRoute
from yak.web.health import health_router
from yak_rest_proxy.api.admin.quotas import quota_router
from yak_rest_proxy.api.admin.security import security_router
from yak_rest_proxy.api.native.admin_routes import admin_router
from yak_rest_proxy.api.native.direct_lane import DirectLane
from yak_rest_proxy.api.native.fast_lane import FastLane
from yak_rest_proxy.api.native.group_admin_routes import group_admin_router
from yak_rest_proxy.api.native.group_routes import group_router
from yak_rest_proxy.api.native.routes import native_router
from yak_rest_proxy.api.native.scheduled_routes import scheduled_router
from yak_rest_proxy.api.native.share_group_admin_routes import share_group_admin_router
from yak_rest_proxy.api.native.share_routes import share_router
from yak_rest_proxy.api.v2.consumer_routes import consumer_router
from yak_rest_proxy.api.v2.metadata_routes import metadata_router
from yak_rest_proxy.api.v2.produce_routes import plain_produce, produce_router
from yak_rest_proxy.api.v3.routes import v3_routers
from yak_rest_proxy.consume.consumer import Consumers
from yak_rest_proxy.consume.group_admin import GroupAdmin
from yak_rest_proxy.consume.share.share_consumer import ShareConsumers
from yak_rest_proxy.consume.share.share_stats import ShareStats
from yak_rest_proxy.http.cors import CorsMiddleware, CorsPolicy
from yak_rest_proxy.http.errors import install_error_handlers
from yak_rest_proxy.http.openapi import install_openapi
from yak_rest_proxy.http.ratelimit_headers import RateLimitHeaders
from yak_rest_proxy.http.read_timeout import BodyReadTimeout
from yak_rest_proxy.http.slashes import StripTrailingSlash
from yak_rest_proxy.metrics import ProxyStats
from yak_rest_proxy.quotas.consumer_cap import ConsumerCap
from yak_rest_proxy.runtime import ProxyRuntime
from yak_rest_proxy.security.forwarded_credential import ForwardCredential
from yak_rest_proxy.security.guard import Guard
from yak_rest_proxy.security.route_acls import missing_routes
from yak_rest_proxy.settings import ProxySettings

__all__ = ["ProxyApp", "cors_policy", "create_app"]


def create_app(
    settings: ProxySettings | None = None,
    *,
    store: MetadataStore | None = None,
    broker_client_factory: Callable[[str], BrokerClient] | None = None,
    clock: Clock | None = None,
) -> ProxyApp:
    """Build the rest-proxy ASGI app (settings default to the ``YAK_*`` environment).

    ``store`` replaces the etcd connection (tests pass a ``MemoryMetadataStore``; the caller
    closes it); ``broker_client_factory`` replaces how broker clients are made (tests reach an
    in-process broker); ``clock`` replaces the system clock (consumer instances, offsets).
    """
    metrics = ServiceMetrics("rest-proxy")
    runtime = ProxyRuntime(
        settings or ProxySettings.from_env(),
        store=store,
        broker_client_factory=broker_client_factory,
        etcd_observer=metrics.observe_etcd,
        stats=ProxyStats(metrics.registry),
        clock=clock,
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await runtime.start()
        await consumers.start()
        try:
            async with metrics.loop_lag.running():
                yield
        finally:
            await consumers.stop()  # the instances it holds: positions written behind
            await shares.aclose()  # parked share fetches: their records released
            await runtime.stop()

    guard = [] if runtime.security_cache is None else [Depends(Guard(runtime.security_cache))]
    app = ProxyApp(
        title="Yak rest-proxy",
        version=__version__,
        description="Confluent REST Proxy v2-compatible API and Yak's native API (/api/v1).",
        lifespan=lifespan,
        redirect_slashes=False,
        dependencies=guard,
    )
    app.state.runtime = runtime
    install_error_handlers(app)
    app.include_router(health_router("rest-proxy", runtime.readiness))
    if start_from_env():  # YAK_TRACEMALLOC: a diagnosis switch (``yak.observability.memory``)
        app.include_router(memory_router())
    app.include_router(metadata_router(runtime))
    app.include_router(produce_router(runtime))
    cap = ConsumerCap(
        runtime.store,
        runtime.keyspace,
        runtime.settings.max_consumers_per_principal,
        retry_after_s=runtime.settings.consumer_instance_timeout_ms // 1000,
    )
    clock = runtime.clock
    consumers = Consumers(
        runtime.store,
        runtime.keyspace,
        runtime.cache,
        runtime.reader,
        clock=clock,
        cap=cap,
        holder=f"{runtime.settings.node_id}-{uuid.uuid4().hex[:12]}",
        flush_interval_ms=runtime.settings.consumer_positions_flush_ms,
        handoff_timeout_ms=runtime.settings.consumer_handoff_timeout_ms,
    )
    app.include_router(consumer_router(runtime, consumers))
    app.include_router(group_router(runtime, consumers))
    shares = ShareConsumers(
        runtime.cache,
        runtime.topics,
        runtime.brokers.fetch_client,
        node_id=runtime.settings.node_id,
        stats=ShareStats(metrics.registry),
    )
    app.include_router(share_router(runtime, shares))
    app.include_router(admin_router(runtime))
    group_admin = GroupAdmin(
        runtime.store, runtime.keyspace, runtime.cache, runtime.reader, clock=clock
    )
    app.include_router(group_admin_router(runtime, group_admin))
    for v3_router in v3_routers(runtime, group_admin):  # Confluent v3 (/v3)
        app.include_router(v3_router)
    app.include_router(share_group_admin_router(runtime))
    app.include_router(scheduled_router(runtime))
    app.include_router(native_router(runtime))
    app.include_router(security_router(runtime))
    app.include_router(quota_router(runtime))
    if guard and missing_routes(app):
        raise RuntimeError(f"routes without an ACL rule (route_acls.py): {missing_routes(app)}")
    app.add_middleware(StripTrailingSlash)
    app.add_middleware(ForwardCredential)
    app.router.routes.append(metrics_route(metrics))
    # In front of FastAPI's own stack: the observability middleware (times and ids every
    # request), CORS when configured, the RateLimit headers, the body-read timeout, then the
    # fast lane, whose requests skip the rest.
    lane = FastLane(
        app.behind_front, runtime=runtime, consumers=consumers, others=(plain_produce(runtime),)
    )
    read_timeout_s = runtime.settings.request_read_timeout_ms / 1000
    front: ASGIApp = BodyReadTimeout(lane, timeout_s=read_timeout_s)
    if runtime.settings.ratelimit_headers:
        front = RateLimitHeaders(front, active=lambda: runtime.quotas.active)
    cors = cors_policy(runtime.settings)
    if cors.enabled:  # outside the fast lane and the guard: preflights carry no credential
        front = CorsMiddleware(front, cors)
    observability = ObservabilityMiddleware(
        front, metrics=metrics, routes=lambda: app.router.routes
    )
    app.front = observability
    if not cors.enabled:  # the fast lane's requests without the ASGI front (under uvicorn)
        app.direct_lane = DirectLane(lane, observability, runtime, read_timeout_s=read_timeout_s)
    install_openapi(app)
    return app


def cors_policy(settings: ProxySettings) -> CorsPolicy:
    """The settings' CORS policy (ValueError, at start, for one the Fetch standard forbids)."""
    return CorsPolicy(
        origins=settings.cors_origins,
        methods=settings.cors_methods,
        headers=settings.cors_headers,
        expose_headers=settings.cors_expose_headers,
        credentials=settings.cors_credentials,
        max_age_s=settings.cors_max_age_s,
    )


class ProxyApp(FastAPI):
    """FastAPI with a front: ``front`` (set by ``create_app``) is the ASGI app every request
    and the lifespan enter, and it ends in ``behind_front``, FastAPI itself. What the front
    serves — the fast lane's hot routes — skips FastAPI's stack (its telemetry check, the
    error and body-limit middlewares, the credential and trailing-slash middlewares, routing):
    seven layers and two ``send`` wrappers per request. Everything else goes on through it.
    Under uvicorn (``main``), the fast lane's requests skip the front too: ``direct_route``."""

    front: ASGIApp | None = None
    #: The fast lane's requests answered on uvicorn's connection (``native.direct_lane``);
    #: None when CORS is configured. ``serve`` takes its ``route`` as the direct route.
    direct_lane: DirectLane | None = None

    @property
    def direct_route(self) -> DirectRoute | None:
        return None if self.direct_lane is None else self.direct_lane.route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.front is None:
            await super().__call__(scope, receive, send)
        else:
            await self.front(scope, receive, send)

    async def behind_front(self, scope: Scope, receive: Receive, send: Send) -> None:
        await super().__call__(scope, receive, send)
