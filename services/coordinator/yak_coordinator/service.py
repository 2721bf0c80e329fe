"""The coordinator process's runtime: metadata cache, election, reconciler, broker recorder,
group coordinator, topic admin, share-group admin and cluster admin (preferred election,
decommission, forgetting a broker).

``start()`` returns at once and connects in the background, retrying while etcd is unreachable,
so the HTTP server answers ``/healthz`` from the first moment and ``/readyz`` once the cache
has loaded; from then on the broker recorder remembers broker sightings (standby or not).
Then the election campaigns; during each term as active controller a reconciler task, a broker
recorder task and a group coordinator task run, and they are cancelled when the term ends.
``stop()`` resigns (revokes the election lease, so a standby takes over at once), then closes
everything it opened — the store only if it created it.

Single event loop. ``admin`` and ``controller_url`` may be called from request handlers at any
time; before the cache is connected they raise ``MetadataStoreError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import httpx

from yak.clients.tls import ClientTls
from yak.clock import Clock, SystemClock
from yak.errors import MetadataStoreError
from yak.metadata.cache import MetadataCache
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace
from yak.metadata.snapshot import ClusterSnapshot
from yak.metadata.store import MetadataStore
from yak.observability.metrics import ServiceMetrics
from yak.observability.request_id import propagate_request_id
from yak.security.cluster_secret import CLUSTER_SECRET_HEADER
from yak_coordinator.broker_recorder import BrokerRecorder
from yak_coordinator.cluster_admin import ClusterAdmin
from yak_coordinator.decisions.partition_health import HealthCounter
from yak_coordinator.election import Candidate, Election, Term
from yak_coordinator.groups.group_admin import GroupAdmin
from yak_coordinator.groups.group_coordinator import GroupCoordinator
from yak_coordinator.metrics import ControllerCollector, ControllerStats
from yak_coordinator.reconciler import Reconciler
from yak_coordinator.settings import CoordinatorSettings
from yak_coordinator.share_group_admin import ShareGroupAdmin
from yak_coordinator.topic_admin import TopicAdmin

__all__ = ["Coordinator"]

log = logging.getLogger(__name__)

_RETRY_MIN_S = 0.2
_RETRY_MAX_S = 5.0
_CONNECT_WAIT_S = 2.0  # etcd is usually up: come up ready rather than ready a moment later


class _Parts:
    """What exists once connected (one object, so it is all there or none of it)."""

    def __init__(
        self,
        settings: CoordinatorSettings,
        store: MetadataStore,
        clock: Clock,
        stats: ControllerStats,
    ) -> None:
        keyspace = Keyspace(settings.cluster_id)
        self.cache = MetadataCache(store, keyspace, clock=clock)
        candidate = Candidate(
            settings.node_id, settings.public_host, settings.port, settings.scheme
        )
        self.election = Election(
            store, keyspace, candidate, ttl_s=settings.lease_ttl_s, clock=clock
        )
        self.reconciler = Reconciler(
            store,
            keyspace,
            self.cache,
            auto_leader_rebalance=settings.auto_leader_rebalance,
            max_drain_moves=settings.decommission_max_moves,
            resync_interval_s=settings.resync_interval_s,
            stats=stats,
        )
        self.recorder = BrokerRecorder(store, keyspace, self.cache, clock)
        self.groups = GroupCoordinator(store, keyspace, self.cache, clock=clock)
        self.group_admin = GroupAdmin(store, keyspace, self.cache)
        self.admin = TopicAdmin(
            store,
            keyspace,
            self.cache,
            self.election,
            clock,
            default_replication_factor=settings.default_replication_factor,
            wait_s=settings.admin_wait_s,
        )
        self.share_group_admin = ShareGroupAdmin(
            store,
            keyspace,
            self.cache,
            self.election,
            self.admin,
            clock,
            wait_s=settings.admin_wait_s,
        )
        self.cluster_admin = ClusterAdmin(
            store,
            keyspace,
            self.cache,
            self.election,
            clock,
            wait_s=settings.admin_wait_s,
            stats=stats,
        )


class Coordinator:
    """One coordinator process's moving parts; see the module docstring."""

    def __init__(
        self,
        settings: CoordinatorSettings,
        *,
        store: MetadataStore | None = None,
        clock: Clock | None = None,
        metrics: ServiceMetrics | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = metrics if metrics is not None else ServiceMetrics("coordinator")
        self._stats = ControllerStats(self.metrics.registry)
        #: The partition health counts of the current snapshot (the overview and the metrics).
        self.health_counts = HealthCounter()
        self.metrics.registry.register(
            ControllerCollector(lambda: self.is_controller, self._snapshot, self.health_counts)
        )
        self._given_store = store
        self._store: MetadataStore | None = store
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._parts: _Parts | None = None
        self._task: asyncio.Task[None] | None = None
        self._http: httpx.AsyncClient | None = None
        self._parts_ready = asyncio.Event()

    @property
    def ready(self) -> bool:
        return self._parts is not None and self._parts.cache.connected

    @property
    def admin(self) -> TopicAdmin:
        return self._connected().admin

    @property
    def cluster_admin(self) -> ClusterAdmin:
        return self._connected().cluster_admin

    @property
    def group_admin(self) -> GroupAdmin:
        return self._connected().group_admin

    @property
    def share_group_admin(self) -> ShareGroupAdmin:
        return self._connected().share_group_admin

    @property
    def cache(self) -> MetadataCache:
        return self._connected().cache

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def http(self) -> httpx.AsyncClient:
        """The client used to forward admin requests to the active controller."""
        if self._http is None:
            raise MetadataStoreError("the coordinator is not started")
        return self._http

    @property
    def store(self) -> MetadataStore:
        """The etcd connection (``MetadataStoreError`` until it is up)."""
        self._connected()
        assert self._store is not None
        return self._store

    @property
    def is_controller(self) -> bool:
        return self._parts is not None and self._parts.election.term is not None

    def _snapshot(self) -> ClusterSnapshot | None:
        return self._parts.cache.snapshot if self._parts is not None else None

    def controller_url(self) -> str | None:
        """The active controller's URL as the metadata says (None while nobody is elected)."""
        controller = self._connected().cache.snapshot.controller
        return controller.url if controller is not None else None

    async def wait_controller(self) -> None:
        """Wait until this coordinator is the active controller (tests and tools)."""
        await self._parts_ready.wait()
        assert self._parts is not None
        await self._parts.election.wait_elected()

    async def start(self) -> None:
        """Start in the background; wait up to ``connect_wait_s`` for the metadata to load."""
        if self._task is None:
            secret = self.settings.cluster_secret
            tls = ClientTls.from_env()
            self._http = httpx.AsyncClient(
                timeout=self.settings.admin_wait_s + 5.0,
                headers={CLUSTER_SECRET_HEADER: secret} if secret else None,
                verify=tls.ssl_context() if tls.configured else True,
                event_hooks={"request": [propagate_request_id]},
            )
            self._task = asyncio.get_running_loop().create_task(self._run())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._parts_ready.wait(), _CONNECT_WAIT_S)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        parts, self._parts = self._parts, None
        if parts is not None:
            await parts.election.stop(resign=True)
            await parts.cache.stop()
        if self._store is not None and self._given_store is None:
            await self._store.aclose()
        self._store = None
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    def _connected(self) -> _Parts:
        if self._parts is None or not self._parts.cache.connected:
            raise MetadataStoreError("the coordinator is not connected to etcd yet")
        return self._parts

    async def _run(self) -> None:
        parts = await self._connect()
        parts.election.start()
        while True:
            term = await parts.election.wait_elected()
            loop = asyncio.get_running_loop()
            tasks = [
                loop.create_task(_term_task("the reconciler", parts.reconciler.run, term)),
                loop.create_task(_term_task("the broker recorder", parts.recorder.run, term)),
                loop.create_task(_term_task("the group coordinator", parts.groups.run, term)),
            ]
            try:
                await term.wait_ended()
            finally:
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

    async def _connect(self) -> _Parts:
        delay = _RETRY_MIN_S
        while True:
            if self._store is None:
                self._store = EtcdMetadataStore.from_url(
                    self.settings.etcd_url, observer=self.metrics.observe_etcd
                )
            parts = _Parts(self.settings, self._store, self._clock, self._stats)
            try:
                await parts.cache.start()
            except MetadataStoreError as exc:
                log.warning("cannot load metadata from etcd (%s); retrying in %.1f s", exc, delay)
                await self._clock.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX_S)
                continue
            parts.recorder.follow()
            self._parts = parts
            self._parts_ready.set()
            return parts


async def _term_task(name: str, work: Callable[[Term], Awaitable[None]], term: Term) -> None:
    """Run one of a term's tasks; its failure ends the term."""
    try:
        await work(term)
    except Exception:  # a bug must not leave an active controller that does nothing
        log.exception("%s failed", name)
        term.end(f"{name} failed")
