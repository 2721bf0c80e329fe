"""``ProxyRuntime``: what one rest-proxy process holds while it runs.

The etcd connection, the cluster metadata cache (one prefix watch), the broker clients, the
producer, the producer-id allocator, the security store, the quota overrides (a prefix watch on
``security/quotas/``) and, with security on, the security cache (a prefix watch on
``security/``). ``start()`` connects (retrying while etcd is
unreachable, so ``/healthz`` answers at once and ``/readyz`` once the metadata is loaded);
``stop()`` flushes nothing — records still queued fail with ``REQUEST_TIMED_OUT`` and their
requests answer so — and closes everything it opened (the store only if it made it).

Nothing here is durable: a proxy can be killed at any moment and another one serves its clients.
Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from yak.clients.admin import AdminClient
from yak.clients.broker import BrokerClient
from yak.clock import Clock, SystemClock
from yak.errors import MetadataStoreError, NotControllerError
from yak.metadata.cache import MetadataCache
from yak.metadata.etcd_store import EtcdMetadataStore, RequestObserver
from yak.metadata.keyspace import Keyspace
from yak.metadata.producer_ids import ProducerIds
from yak.metadata.store import MetadataStore
from yak.partitioner import Partitioner
from yak.security.cache import SecurityCache
from yak.security.login_limiter import FailedLoginLimiter
from yak.security.quota_overrides import QuotaOverrides
from yak.security.quota_store import QuotaStore
from yak.security.store import SecurityStore
from yak_rest_proxy.brokers import BrokerPool
from yak_rest_proxy.consume.reader import Reader
from yak_rest_proxy.http.idempotency import Idempotency
from yak_rest_proxy.metrics import ProxyStats
from yak_rest_proxy.produce.partitioners import Partitioners
from yak_rest_proxy.produce.producer import Producer
from yak_rest_proxy.quotas.quotas import Quotas
from yak_rest_proxy.schemas import RegistryClient, Schemas
from yak_rest_proxy.security.forwarded_credential import ForwardedAuth
from yak_rest_proxy.settings import ProxySettings
from yak_rest_proxy.topics import TopicLookup

__all__ = ["ProxyRuntime"]

log = logging.getLogger(__name__)

_RETRY_MIN_S = 0.2
_RETRY_MAX_S = 5.0
_CONNECT_WAIT_S = 5.0


class ProxyRuntime:
    """One proxy process's connections and shared state; see the module docstring."""

    def __init__(
        self,
        settings: ProxySettings,
        *,
        store: MetadataStore | None = None,
        broker_client_factory: Callable[[str], BrokerClient] | None = None,
        etcd_observer: RequestObserver | None = None,
        stats: ProxyStats | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings
        #: The proxy's one source of time (tests pass a ``FakeClock``).
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.stats = stats if stats is not None else ProxyStats()
        self.keyspace = Keyspace(settings.cluster_id)
        self._owns_store = store is None
        self.store: MetadataStore = (
            store
            if store is not None
            else EtcdMetadataStore.from_url(settings.etcd_url, observer=etcd_observer)
        )
        self.cache = MetadataCache(self.store, self.keyspace)
        #: Topic lookups that catch up with etcd before answering "not found".
        self.topics = TopicLookup(self.cache, self.store, self.keyspace)
        self.brokers = BrokerPool(
            self.cache,
            timeout_s=settings.produce_timeout_ms / 1000 + 5,
            client_factory=broker_client_factory,
        )
        self.producer_ids = ProducerIds(lambda: self.store, self.keyspace)
        self.producer = Producer(
            self.cache,
            self.brokers,
            self.producer_ids,
            linger_ms=settings.linger_ms,
            max_in_flight=settings.max_in_flight,
            batch_max_bytes=settings.batch_max_bytes,
            compression=settings.compression,
            delivery_timeout_ms=settings.produce_timeout_ms,
            stats=self.stats.produce,
            clock=self.clock,
        )
        #: Keyless records' partitioners by name; ``partitioner`` is the setting's.
        self.partitioners = Partitioners(self.cache, self.clock)
        self.partitioner: Partitioner = self.partitioners.get(settings.partitioner)
        self.reader = Reader(self.cache, self.brokers, self.stats.poll, self.clock)
        self.security_store = SecurityStore(self.store, self.keyspace)
        self.security_cache: SecurityCache | None = None
        if settings.security:
            limiter = FailedLoginLimiter(settings.auth_max_failures, settings.auth_failure_window_s)
            self.security_cache = SecurityCache(
                self.store,
                self.keyspace,
                super_users=settings.super_users,
                clock=self.clock,
                login_limiter=limiter,
            )
        #: ``Idempotency-Key`` records of the simple produce routes (``http.idempotency``).
        self.idempotency = Idempotency(
            self.store,
            self.keyspace,
            self.clock,
            window_s=settings.idempotency_window_s,
            work_timeout_ms=settings.produce_timeout_ms,
        )
        self.quota_store = QuotaStore(self.store, self.keyspace)
        self.quota_overrides = QuotaOverrides(self.store, self.keyspace, self.clock)
        self.quotas = Quotas(
            self.quota_overrides,
            produce_bytes_per_s=settings.quota_produce_bytes_per_s,
            fetch_bytes_per_s=settings.quota_fetch_bytes_per_s,
            clock=self.clock,
        )
        #: The schema formats' encoders, decoders and registry client (``schemas``).
        registry = settings.schema_registry_url
        # As for the coordinator: the registry authorizes the end user (its credential).
        client = RegistryClient(registry, auth=ForwardedAuth()) if registry else None
        self.schemas = Schemas(client)
        self._connect: asyncio.Task[None] | None = None
        self._admin: AdminClient | None = None
        self._retired_admins: list[AdminClient] = []

    def coordinator(self) -> AdminClient:
        """A client of the active controller's admin API (``NOT_CONTROLLER`` while none)."""
        controller = self.cache.snapshot.controller
        if controller is None:
            raise NotControllerError("no coordinator is the active controller right now")
        if self._admin is None or self._admin.base_url != controller.url:
            if self._admin is not None:
                self._retired_admins.append(self._admin)
            # The caller's own credential goes along: the controller authorizes the end user.
            self._admin = AdminClient(controller.url, auth=ForwardedAuth())
        return self._admin

    async def wait_for_security(self, revision: int) -> None:
        """Wait until this proxy's security cache reflects a write (no-op with security off)."""
        if self.security_cache is not None and revision > 0:
            await self.security_cache.wait_for_revision(revision)

    @property
    def ready(self) -> bool:
        return self.cache.connected

    async def start(self) -> None:
        """Connect in the background; wait a little so a healthy etcd gives a ready proxy."""
        self._connect = asyncio.get_running_loop().create_task(self._connect_loop())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._connect), _CONNECT_WAIT_S)

    async def _connect_loop(self) -> None:
        delay = _RETRY_MIN_S
        while True:
            try:
                if self.security_cache is not None and self.security_cache.revision == 0:
                    await self.security_cache.start()
                if not self.quota_overrides.started:
                    await self.quota_overrides.start()
                await self.cache.start()
                return
            except MetadataStoreError as exc:
                log.warning("cannot load the cluster metadata (%s); retrying", exc)
                await asyncio.sleep(delay)  # backoff while etcd is unreachable
                delay = min(delay * 2, _RETRY_MAX_S)

    async def stop(self) -> None:
        if self._connect is not None:
            self._connect.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._connect
        await self.producer.aclose()
        await self.cache.stop()
        await self.quota_overrides.stop()
        if self.security_cache is not None:
            await self.security_cache.stop()
        await self.brokers.aclose()
        await self.schemas.aclose()
        for admin in [*self._retired_admins, *([self._admin] if self._admin else [])]:
            await admin.aclose()
        if self._owns_store:
            await self.store.aclose()

    async def readiness(self) -> str | None:
        return None if self.ready else "the cluster metadata is not loaded (etcd unreachable?)"
