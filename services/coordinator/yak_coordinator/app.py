"""The coordinator service's app factory.

The coordinator is the controller: one of them (elected through etcd) assigns partitions,
elects leaders and applies topic changes; the others stand by and forward admin requests to
it. ``create_app(settings)`` wires the runtime (``service.Coordinator``) into FastAPI: the
lifespan starts it (connecting to etcd in the background) and stops it (resigning first), so
SIGTERM hands control to a standby at once. ``/readyz`` is ready once the metadata is loaded.
``/metrics`` (``metrics``; docs/observability.md) is open, like the health checks; a standby
answers it itself and forwards the request id of what it forwards.
With ``YAK_SECURITY=on`` every admin route needs a user's credential and the ACL of its entry
in ``security/route_acls.py`` (``security/guard.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI

from yak import __version__
from yak.clock import Clock
from yak.metadata.store import MetadataStore
from yak.observability.http import install_observability
from yak.observability.metrics import ServiceMetrics
from yak.web.cluster_secret import ClusterSecretMiddleware
from yak.web.errors import install_error_handlers
from yak.web.health import health_router
from yak_coordinator.forwarding import ControllerForwarding
from yak_coordinator.groups_routes import groups_router
from yak_coordinator.openapi import install_openapi
from yak_coordinator.routes import admin_router
from yak_coordinator.security.admin_routes import security_admin_router
from yak_coordinator.security.guard import AdminGuard, AdminSecurity
from yak_coordinator.security.route_acls import missing_routes
from yak_coordinator.service import Coordinator
from yak_coordinator.settings import CoordinatorSettings
from yak_coordinator.share_group_routes import share_groups_router

__all__ = ["create_app"]


def create_app(
    settings: CoordinatorSettings | None = None,
    *,
    store: MetadataStore | None = None,
    clock: Clock | None = None,
) -> FastAPI:
    """Build the coordinator ASGI app.

    ``store`` replaces the etcd connection named in the settings (tests pass a
    ``MemoryMetadataStore``); the caller then owns it and closes it.
    """
    settings = settings if settings is not None else CoordinatorSettings()
    metrics = ServiceMetrics("coordinator")
    coordinator = Coordinator(settings, store=store, clock=clock, metrics=metrics)
    security = AdminSecurity(coordinator, settings.super_users) if settings.security else None

    async def ready() -> str | None:
        return None if coordinator.ready else "not connected to etcd"

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await coordinator.start()
        try:
            async with metrics.loop_lag.running():
                yield
        finally:
            if security is not None:
                await security.stop()
            await coordinator.stop()

    guard = [] if security is None else [Depends(AdminGuard(security))]
    app = FastAPI(
        title="Yak coordinator", version=__version__, lifespan=lifespan, dependencies=guard
    )
    app.state.coordinator = coordinator
    app.state.admin_security = security
    install_error_handlers(app)
    app.include_router(health_router("coordinator", ready))
    app.include_router(admin_router(coordinator))
    app.include_router(groups_router(coordinator))
    app.include_router(share_groups_router(coordinator))
    app.include_router(security_admin_router(coordinator))  # the proxies' security writes
    if security is not None and (missing := missing_routes(app)):
        raise RuntimeError(f"admin routes without an ACL rule: {missing}")
    app.add_middleware(ControllerForwarding, coordinator=coordinator)
    if settings.cluster_secret is not None:
        # Outermost: a standby checks the secret before forwarding (with its own secret).
        app.add_middleware(ClusterSecretMiddleware, secret=settings.cluster_secret)
    install_observability(app, metrics)  # outermost: times and ids every request
    install_openapi(app)
    return app
