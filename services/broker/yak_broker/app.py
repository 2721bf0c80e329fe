"""The broker service's app factory.

The broker stores partition replicas and serves them: the binary data plane (``/v1/produce``,
``/v1/fetch``: plain Starlette routes, see ``data_plane``), JSON endpoints for offsets and
partitions (FastAPI, see ``admin_routes``), ``/healthz``/``/readyz`` and ``/metrics``
(``metrics``; docs/observability.md). With a cluster secret configured, every route but the
health checks and ``/metrics`` refuses callers without it (``yak.web.cluster_secret``). The
lifespan starts and stops the ``Broker`` (logs, metadata, registration); uvicorn stops
accepting connections and lets requests finish before the lifespan's shutdown runs. Served by
``main``, the first stop signal moves the broker's leaderships away before that, while every
listener still serves (``Broker.controlled_shutdown`` as ``yak.web.drain``'s drain).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from yak import __version__
from yak.heap import HeapFreezer
from yak.observability.http import install_observability
from yak.observability.memory import memory_router, start_from_env
from yak.observability.metrics import ServiceMetrics
from yak.web.cluster_secret import ClusterSecretMiddleware
from yak.web.errors import install_error_handlers
from yak.web.health import health_router
from yak_broker.api.admin_routes import admin_router
from yak_broker.api.data_plane import data_plane_routes
from yak_broker.api.internal_listener import InternalListener
from yak_broker.kafka.listener import KafkaListener
from yak_broker.server.broker import Broker, StoreFactory
from yak_broker.settings import BrokerSettings

__all__ = ["create_app"]


def create_app(
    settings: BrokerSettings | None = None,
    *,
    store_factory: StoreFactory | None = None,
    heap: HeapFreezer | None = None,
) -> FastAPI:
    """Build the broker ASGI app (settings default to the ``YAK_*`` environment; ``heap``: see
    ``Broker``)."""
    metrics = ServiceMetrics("broker")
    broker = Broker(
        settings or BrokerSettings.from_env(),
        store_factory,
        listener_factory=InternalListener,
        kafka_listener_factory=KafkaListener,
        metrics=metrics,
        heap=heap,
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await broker.start()
        try:
            async with metrics.loop_lag.running():
                yield
        finally:
            await broker.stop()

    app = FastAPI(title="Yak broker", version=__version__, lifespan=lifespan)
    app.state.broker = broker
    app.include_router(health_router("broker", broker.readiness))
    app.include_router(admin_router(broker))
    if start_from_env():  # YAK_TRACEMALLOC: a diagnosis switch (``yak.observability.memory``)
        app.include_router(memory_router())
    app.router.routes.extend(data_plane_routes(broker))
    install_error_handlers(app)
    if broker.settings.cluster_secret is not None:
        app.add_middleware(ClusterSecretMiddleware, secret=broker.settings.cluster_secret)
    install_observability(app, metrics)  # outermost: times and ids every request
    return app
