"""The schema registry's app factory.

``create_app(settings)`` opens the metadata store (etcd, or the ``store`` a test passes) and
wires ``SchemaRegistry``, ``Deletions`` and the settings store into the routers of Confluent's
API. Every answer has Confluent's content type, every error Confluent's body
(``api.errors``). ``/healthz`` and ``/readyz`` are Yak's; ready means etcd answers.
``/metrics`` (docs/observability.md) times every route and every etcd call, as in every
Yak service. With ``security`` on, every route passes the guard of ``api.security`` (the
cluster's users and ACLs); the app refuses to be built while a route is missing from its table.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse

from yak import __version__
from yak.errors import MetadataStoreError
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace
from yak.metadata.store import MetadataStore
from yak.observability.http import install_observability
from yak.observability.metrics import ServiceMetrics
from yak.web.health import health_router
from yak.web.route_acls import missing_routes
from yak_schema_registry.api.config_routes import config_router
from yak_schema_registry.api.errors import install_registry_error_handlers
from yak_schema_registry.api.openapi import install_openapi
from yak_schema_registry.api.schema_routes import schema_router
from yak_schema_registry.api.security import ROUTE_ACLS, RegistrySecurity, registry_guard
from yak_schema_registry.api.subject_routes import subject_router
from yak_schema_registry.api.wire import RegistryJSONResponse
from yak_schema_registry.deletions import Deletions
from yak_schema_registry.registry import SchemaRegistry
from yak_schema_registry.settings import RegistrySettings
from yak_schema_registry.settings_store import RegistrySettingsStore
from yak_schema_registry.storage import SchemaStorage

__all__ = ["create_app"]


def create_app(
    settings: RegistrySettings | None = None, *, store: MetadataStore | None = None
) -> FastAPI:
    """Build the registry ASGI app; ``store`` replaces the etcd connection of the settings
    (the caller then owns it and closes it)."""
    settings = settings if settings is not None else RegistrySettings()
    metrics = ServiceMetrics("schema-registry")
    owned = store is None
    metadata: MetadataStore = (
        EtcdMetadataStore.from_url(settings.etcd_url, observer=metrics.observe_etcd)
        if store is None
        else store
    )
    storage = SchemaStorage(metadata, Keyspace(settings.cluster_id).root)
    config = RegistrySettingsStore(storage)
    registry = SchemaRegistry(storage, config)
    security = (
        RegistrySecurity(metadata, settings.cluster_id, settings.super_users)
        if settings.security
        else None
    )

    async def ready() -> str | None:
        try:
            await config.mode(None)
        except MetadataStoreError as exc:
            return f"etcd unreachable: {exc}"
        return None

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        try:
            async with metrics.loop_lag.running():
                yield
        finally:
            if security is not None:
                await security.stop()
            if owned:
                await metadata.aclose()

    app = FastAPI(
        title="Yak schema registry",
        version=__version__,
        lifespan=lifespan,
        default_response_class=RegistryJSONResponse,
        dependencies=[Depends(registry_guard(security))] if security is not None else [],
    )
    app.state.security = security
    install_registry_error_handlers(app)
    # Yak's own checks answer plain JSON (``yak.web.health``), not Confluent's content type.
    app.include_router(health_router("schema-registry", ready), default_response_class=JSONResponse)
    app.include_router(schema_router(registry))
    app.include_router(subject_router(registry, Deletions(storage, config)))
    app.include_router(config_router(registry, config))
    if security is not None and (missing := missing_routes(app, ROUTE_ACLS)):
        raise RuntimeError(f"routes without an ACL entry (api.security): {missing}")
    install_openapi(app)
    install_observability(app, metrics)  # outermost: times and ids every request
    return app
