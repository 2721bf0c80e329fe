"""The broker's parts wired together, with the order they start and stop in.

Start (``Broker.start``, from the app's lifespan):

1. check ``meta.properties`` (the data folder belongs to this cluster id and broker id);
2. connect to etcd and load the metadata cache (fails if etcd is unreachable); on a new data
   folder, announce it on the registration a previous process left (``announce_log_dir``);
3. open the log manager: lock the data folder (a second process fails here) and load or
   recover every partition log, each with its topic's config;
4. reconcile the hosted replicas with the metadata (delete stray logs, create missing ones),
   then start the log manager's background work and the reconcile loop;
5. open the internal listener (produce, fetch and replication in Kafka's framing; the
   transport layer's ``yak_broker.api.internal_listener``, handed in by the app as
   ``listener_factory``, so this layer never imports the one above it) on ``data_port``,
   then the public Kafka listener (``yak_broker.kafka``, ``kafka_listener_factory``) on
   ``kafka_port`` — unless the port is -1 — with its security protocol
   (``settings.kafka_protocol``: ``SASL_SSL`` in secure mode; the TLS context only for
   ``SSL``/``SASL_SSL``; under a cluster secret or security only ``SASL_*`` is accepted, so
   the Kafka door never opens a way around the users and the ACLs);
6. register ``brokers/<id>`` with its ports — last, so the broker is announced only once it
   can serve; then sample the process's load every ``load_publish_interval_ms`` and publish it
   in the registration when it moved (``load_sampler``). The ISR writes, fenced by the
   registration's bytes, share the registrar's gate that its rewrites hold alone
   (``registration_gate``).

Stop, in Kafka's order: first a controlled shutdown (``Broker.controlled_shutdown``) while both
listeners still serve. If this broker leads partitions that have another live in-sync replica,
it marks its registration ``shutting_down`` and waits (on metadata events, up to
``controlled_shutdown_timeout_s``) until the controller has moved those leaderships away;
meanwhile it keeps answering — a produce for a partition it no longer leads gets
``NOT_LEADER_OR_FOLLOWER`` — so producers move to the new leader at once instead of meeting a
closed port or waiting for the lease to expire; once they moved it keeps answering for
``controlled_shutdown_linger_s`` (0.5 s), so a client between two requests still meets it and
learns the new leader. In the process the first SIGTERM/SIGINT runs it
(``main`` hands it to ``yak.web.serve`` as the drain) before uvicorn closes the HTTP listener;
a second signal cuts the wait short (the fast path). Then uvicorn closes the HTTP listener and
lets its requests finish, and the lifespan's ``Broker.stop`` does the rest (starting with the
controlled shutdown when nothing ran it yet: an in-process stop): wake every long-polling
fetch, deregister (revoke the lease: the key goes at once), close the Kafka listener, the
internal listener and their connections, stop the reconcile loop, the ISR ticks, the
share-partition drivers (``shares``: ShareFetch/ShareAcknowledge at the leader) and their
dead-letter clients, the share-state store's clients (``share_state_store``:
share-partition snapshots in ``__yak_share_state``) and the replica fetchers (waiting acks=all
producers get ``NOT_LEADER_OR_FOLLOWER``), the cache, shut the log manager down cleanly
(flush, checkpoints, clean-shutdown marker, unlock), close the etcd connection. A failed start
undoes what it did.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
import uuid
from collections.abc import Callable
from typing import Protocol

from yak.clock import SystemClock
from yak.errors import BrokerNotAvailableError, MetadataStoreError
from yak.heap import HeapFreezer
from yak.metadata.cache import MetadataCache
from yak.metadata.catch_up import CatchUp
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace, ParsedKey
from yak.metadata.models import BrokerRegistration, PartitionState
from yak.metadata.snapshot import ClusterSnapshot
from yak.metadata.store import Compare, MetadataStore
from yak.observability.metrics import ServiceMetrics
from yak.types import TopicPartition
from yak.web.tls import ServerTls
from yak_broker.metrics import (
    BrokerCollector,
    BrokerTopicStats,
    ConsumerOffsets,
    SegmentFilesCollector,
)
from yak_broker.replication.fetch_waiter import FetchWaiters
from yak_broker.replication.isr_writer import IsrWriter
from yak_broker.replication.replica_manager import ReplicaManager
from yak_broker.replication.state.messages import AlterIsr
from yak_broker.replication.state.replica_plan import log_config_of
from yak_broker.server.delay_indexer import DelayIndexer
from yak_broker.server.load_sampler import (
    LoadPublisher,
    LoadSampler,
    PsutilProcess,
    disk_used_ratio,
    records_appended,
)
from yak_broker.server.log_dir_monitor import LogDirMonitor
from yak_broker.server.meta_properties import check_meta_properties
from yak_broker.server.registration import BrokerRegistrar, announce_log_dir
from yak_broker.settings import BrokerSettings
from yak_broker.share.dead_letters import LeaderProducer
from yak_broker.share.share_manager import ShareManager
from yak_broker.share.share_metrics import ShareCollector, ShareMetrics
from yak_broker.share.share_reader import ShareLog
from yak_broker.share.state_topic_clients import BrokerClients
from yak_broker.share.topic_state_store import TopicShareStateStore
from yak_broker.storage.log_config import LogConfig
from yak_broker.storage.log_manager import LogManager

__all__ = ["Broker", "Listener", "ListenerFactory", "StoreFactory"]

_log = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


#: Opens the metadata store for an etcd URL (tests pass an in-memory store).
StoreFactory = Callable[[str], MetadataStore]
_EMPTY = ClusterSnapshot(revision=0)
#: The longest a request naming metadata the cache lacks waits for the watch to deliver it.
CATCH_UP_S = 2.0


class Listener(Protocol):
    """The internal plane's listener, as the broker starts and stops it."""

    @property
    def port(self) -> int: ...

    async def start(self, host: str, port: int) -> int: ...

    async def stop(self) -> None: ...


#: Builds the listener serving this broker (with the TLS context when TLS is on).
ListenerFactory = Callable[["Broker", ssl.SSLContext | None], Listener]


class Broker:
    """One broker process's state: logs, metadata, replicas, registration."""

    def __init__(
        self,
        settings: BrokerSettings,
        store_factory: StoreFactory | None = None,
        *,
        listener_factory: ListenerFactory,
        kafka_listener_factory: ListenerFactory | None = None,
        metrics: ServiceMetrics | None = None,
        heap: HeapFreezer | None = None,
    ) -> None:
        """``heap``: freezes the process's heap as logs come and go (``yak.heap``); the
        process entry point passes one, tests that run brokers in their own process don't."""
        self.settings = settings
        self._listener_factory = listener_factory
        self._kafka_listener_factory = kafka_listener_factory
        self.keyspace = Keyspace(settings.cluster_id)
        self.incarnation = uuid.uuid4().hex
        #: The data folder's ``directory.id`` (read by ``start``; see ``meta_properties``).
        self.log_dir_id = ""
        self.metrics = metrics if metrics is not None else ServiceMetrics("broker")
        self._store_factory: StoreFactory = store_factory or self._etcd
        self.waiters: FetchWaiters[TopicPartition] = FetchWaiters()
        self.logs = LogManager(
            settings.data_dir,
            topic_config=self._topic_config,
            flush_check_interval_ms=settings.flush_check_interval_ms,
            checkpoint_interval_ms=settings.checkpoint_interval_ms,
            retention_check_interval_ms=settings.retention_check_interval_ms,
            max_open_files=settings.max_open_files,
            heap=heap,
        )
        self.replicas = ReplicaManager(
            settings.broker_id,
            self.logs,
            self.snapshot,
            self.waiters,
            replica_lag_time_max_ms=settings.replica_lag_time_max_ms,
            fetch_wait_max_ms=settings.replica_fetch_wait_max_ms,
            fetch_backoff_ms=settings.replica_fetch_backoff_ms,
            stats=BrokerTopicStats(self.metrics.registry),
        )
        #: The delay index of each replica of a topic with delays (``delay_indexer``).
        self.delays = DelayIndexer(lambda: self.replicas.replicas, self.snapshot)
        self.replicas.on_applied = self.delays.sync
        offsets = ConsumerOffsets(lambda: self._store, self.keyspace)
        self.metrics.before_scrape.append(offsets.refresh)
        self.metrics.registry.register(
            BrokerCollector(
                settings.broker_id,
                self.replicas.partition_views,
                offsets,
                max_partition_series=settings.metrics_partition_series,
            )
        )
        self.metrics.registry.register(SegmentFilesCollector(self.logs.files))
        self._store: MetadataStore | None = None
        #: The leaders' ISR changes, written to etcd in batches.
        #: Fenced by this process's registration: a previous process's proposals fail.
        self._isr_writer = IsrWriter(lambda: self._store, self.keyspace, fence=self._fence)
        self._cache: MetadataCache | None = None
        self._catch_up: CatchUp | None = None
        #: Share-partition snapshots in ``__yak_share_state`` (the share drivers' store).
        self.share_state_store = TopicShareStateStore(
            self.snapshot, self.wait_for_metadata, BrokerClients()
        )
        #: The share-partitions led here (ShareFetch/ShareAcknowledge on the internal plane).
        self._dead_letters = LeaderProducer(self.snapshot)
        self.shares = ShareManager(
            self.snapshot,
            self._share_log,
            self.share_state_store,
            self.waiters,
            clock=SystemClock(),
            metrics=ShareMetrics(self.metrics.registry),
            dead_letters=self._dead_letters,
            delay_source=self.delays.delay_source,
            handover=self.replicas.wait_handed_over,
        )
        self.metrics.registry.register(ShareCollector(self.shares.stats, _now_ms))
        self._registrar: BrokerRegistrar | None = None
        self._load_task: asyncio.Task[None] | None = None
        self._reconcile: asyncio.Task[None] | None = None
        self._ticks: asyncio.Task[None] | None = None
        self._metadata_changed = asyncio.Event()
        self._logs_open = False
        self._started = False
        #: The controlled shutdown began (it runs once: the drain's, else the stop's).
        self._handing_over = False
        self.listener: Listener | None = None
        #: The public Kafka listener (None: not opened; see the module doc).
        self.kafka_listener: Listener | None = None

    def _etcd(self, url: str) -> MetadataStore:
        return EtcdMetadataStore.from_url(url, observer=self.metrics.observe_etcd)

    @property
    def metadata_store(self) -> MetadataStore:
        """The metadata store (BrokerNotAvailableError before ``start``)."""
        if self._store is None:
            raise BrokerNotAvailableError(f"broker {self.settings.broker_id} is not started")
        return self._store

    def snapshot(self) -> ClusterSnapshot:
        """The latest cluster metadata (empty before ``start``)."""
        return self._cache.snapshot if self._cache is not None else _EMPTY

    async def caught_up(self, *wanted: str) -> ClusterSnapshot:
        """The metadata once the cache holds what etcd holds under each of ``wanted`` (keys,
        or prefixes ending in ``/``), waiting at most ``CATCH_UP_S`` (``yak.metadata.
        catch_up``); as it is if etcd does not answer."""
        if self._cache is None or self._store is None:
            raise BrokerNotAvailableError(f"broker {self.settings.broker_id} is not started")
        if self._catch_up is None:
            self._catch_up = CatchUp(self._cache, self._store, timeout_s=CATCH_UP_S)
        await self._catch_up.sync(*wanted)
        return self.snapshot()

    async def wait_for_metadata(
        self, predicate: Callable[[ClusterSnapshot], bool], timeout_s: float
    ) -> ClusterSnapshot:
        """Wait until ``predicate`` holds for the metadata; TimeoutError after ``timeout_s``."""
        if self._cache is None:
            raise BrokerNotAvailableError(f"broker {self.settings.broker_id} is not started")
        return await self._cache.wait_for(predicate, timeout_s)

    def _topic_config(self, topic: str) -> LogConfig | None:
        record = self.snapshot().topics.get(topic)
        return log_config_of(record.configs) if record is not None else None

    def _share_log(self, tp: TopicPartition) -> tuple[ShareLog, int]:
        """The log of a partition led here and its leader epoch (the share manager's)."""
        replica, state = self.replicas.leader(tp)
        return replica.log, state.leader_epoch

    def _on_metadata_change(self, parsed: ParsedKey) -> None:
        self.replicas.on_metadata_change(parsed)
        self.shares.on_metadata_change(parsed)
        self._metadata_changed.set()

    async def start(self) -> None:
        """Bring the broker up (see the module doc); undo everything if a step fails."""
        settings = self.settings
        self.log_dir_id = check_meta_properties(
            settings.data_dir, settings.cluster_id, settings.broker_id
        )
        # Before any replica exists: leading and fetching both carry the folder's id.
        self.replicas.log_dir_id = self.log_dir_id
        self._started = True
        try:
            self._store = self._store_factory(settings.etcd_url)
            self._cache = MetadataCache(
                self._store,
                self.keyspace,
                on_change=self._on_metadata_change,
                on_reload=self.replicas.on_reload,
            )
            await self._cache.start()
            # An empty-disk restart: the controller must stop counting the lost logs before
            # this process serves anything, not after the old lease expires.
            try:
                await announce_log_dir(
                    self._store, self.keyspace, settings.broker_id, self.log_dir_id
                )
            except MetadataStoreError as exc:  # best effort: the lease expiry tells it too
                _log.warning("could not announce the new data folder: %s", exc)
            self.replicas.alter_isr_writer = self._alter_isr
            self.logs.open()
            self._logs_open = True
            self.replicas.load_local()
            await self.replicas.apply(self.snapshot())
            await self.logs.start()
            self.delays.start()
            self._reconcile = asyncio.create_task(self.replicas.run(), name="replica-reconcile")
            self._ticks = asyncio.create_task(self.replicas.run_ticks(), name="isr-ticks")
            tls = ServerTls.from_env() if settings.tls else None
            self.listener = self._listener_factory(
                self, tls.ssl_context() if tls is not None else None
            )
            await self.listener.start(settings.host, settings.data_port)
            await self._open_kafka_listener(tls.ssl_context() if tls is not None else None)
            await self.share_state_store.start()
            self._registrar = BrokerRegistrar(
                self._store,
                self.keyspace,
                self._registration(),
                ttl_s=settings.lease_ttl_s,
                wait_s=settings.registration_wait_s,
            )
            await self._registrar.register()
            self._load_task = asyncio.create_task(
                self._publishers(self._registrar), name="registration-publishers"
            )
        except BaseException:
            await self.stop()
            raise

    async def _open_kafka_listener(self, ssl_context: ssl.SSLContext | None) -> None:
        settings = self.settings
        if self._kafka_listener_factory is None or settings.kafka_port < 0:
            return
        protocol = settings.kafka_protocol
        self.kafka_listener = self._kafka_listener_factory(
            self, ssl_context if protocol.tls else None
        )
        _log.info("Kafka listener security protocol: %s", protocol)
        await self.kafka_listener.start(settings.host, settings.kafka_port)

    def _registration(self) -> BrokerRegistration:
        return BrokerRegistration(
            broker_id=self.settings.broker_id,
            host=self.settings.public_host,
            port=self.settings.port,
            rack=self.settings.rack,
            started_at_ms=time.time_ns() // 1_000_000,
            incarnation=self.incarnation,
            log_dir_id=self.log_dir_id,
            scheme="https" if self.settings.tls else "http",
            data_port=self.listener.port if self.listener is not None else None,
            kafka_host=self.settings.kafka_advertised_host,
            kafka_port=self.kafka_port,
        )

    @property
    def kafka_port(self) -> int | None:
        """The Kafka port advertised to clients (None: no Kafka listener)."""
        if self.kafka_listener is None:
            return None
        return self.settings.kafka_advertised_port or self.kafka_listener.port

    async def _publishers(self, registrar: BrokerRegistrar) -> None:
        """What the registration carries besides the address: the load sample and the data
        folder's failures (``log_dir_monitor``)."""
        monitor = LogDirMonitor(
            self.replicas.log_dir_failures,
            self.settings.data_dir,
            self.log_dir_id,
            registrar.publish_offline_log_dirs,
        )
        await asyncio.gather(self._load_publisher(registrar).run(), monitor.run())

    def _load_publisher(self, registrar: BrokerRegistrar) -> LoadPublisher:
        interval_ms, clock = self.settings.load_publish_interval_ms, SystemClock()
        sampler = LoadSampler(
            PsutilProcess(),
            disk_used_ratio(self.settings.data_dir),
            records_appended(self.replicas.stats),
            clock,
            interval_ms,
        )
        return LoadPublisher(sampler, registrar.publish_load, clock, interval_ms)

    def _fence(self) -> Compare | None:
        return self._registrar.fence() if self._registrar is not None else None

    async def _alter_isr(self, proposal: AlterIsr) -> PartitionState | None:
        registrar = self._registrar
        if registrar is None:  # not registered: the writer writes nothing (no fence)
            return await self._isr_writer.write(proposal)
        async with registrar.fenced_writes():  # no registration rewrite overlaps it
            return await self._isr_writer.write(proposal)

    def _leads_movable_partitions(self) -> bool:
        """Whether this broker leads a partition another live in-sync replica could lead."""
        snapshot, me = self.snapshot(), self.settings.broker_id
        ready = {b for b, r in snapshot.brokers.items() if not r.shutting_down and b != me}
        return any(
            state.leader == me and any(r in ready for r in state.isr)
            for state in snapshot.partitions.values()
        )

    async def controlled_shutdown(self) -> None:
        """Move this broker's leaderships to other in-sync replicas while it keeps serving
        (see the module doc); returns once none is left to move, or after
        ``controlled_shutdown_timeout_s``. Runs once: later calls, and ``stop``, return at
        once. Cancelling it ends the wait (what was not moved yet moves when the broker
        deregisters)."""
        if self._handing_over:
            return
        self._handing_over = True
        try:
            await self._hand_over()
        except asyncio.CancelledError:
            _log.warning("controlled shutdown cut short; stopping with leaderships held")
            raise
        except Exception:
            _log.exception("controlled shutdown failed; stopping anyway")

    async def _hand_over(self) -> None:
        registrar = self._registrar
        if registrar is None or not registrar.registered or not self._leads_movable_partitions():
            return
        marked = registrar.registration.model_copy(update={"shutting_down": True})
        if not await registrar.update(marked):
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.controlled_shutdown_timeout_s
        _log.info("controlled shutdown: waiting for the controller to move leaderships away")
        while True:
            self._metadata_changed.clear()
            if not self._leads_movable_partitions():
                linger_s = self.settings.controlled_shutdown_linger_s
                _log.info("controlled shutdown: no partition left to move; %.1f s more", linger_s)
                # A client between two requests learns the new leader from this broker's
                # NOT_LEADER_OR_FOLLOWER, not from a refused connection (a deliberate pause).
                await asyncio.sleep(linger_s)
                return
            remaining = deadline - loop.time()
            if remaining <= 0:
                _log.warning("controlled shutdown timed out; stopping with leaderships held")
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._metadata_changed.wait(), remaining)

    async def stop(self) -> None:
        """Stop everything that was started, in reverse order; safe to call twice."""
        await self.controlled_shutdown()
        self.waiters.notify_all()
        self.replicas.replica_waiters.notify_all()
        self.replicas.fetch_sessions.close_all()  # parked session fetches answer at once
        load_task, self._load_task = self._load_task, None
        if load_task is not None:
            load_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await load_task
        registrar, self._registrar = self._registrar, None
        if registrar is not None:
            await registrar.deregister()
        for listener in (self.kafka_listener, self.listener):
            if listener is not None:
                await listener.stop()
        self.kafka_listener = self.listener = None
        for task in (self._reconcile, self._ticks):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._reconcile = self._ticks = None
        await self.shares.close()
        await self._dead_letters.aclose()
        await self.share_state_store.stop()
        await self.replicas.stop()
        await self._isr_writer.close()
        cache, self._cache, self._catch_up = self._cache, None, None
        if cache is not None:
            await cache.stop()
        await self.delays.stop()
        if self._logs_open:
            self._logs_open = False
            await self.logs.shutdown()
        store, self._store = self._store, None
        if store is not None:
            await store.aclose()
        _log.info("broker %d stopped", self.settings.broker_id)

    async def readiness(self) -> str | None:
        """None when serving normally, else why not (for ``/readyz``)."""
        if not self._started:
            return "not started"
        if self._cache is None or not self._cache.connected:
            return "not connected to the metadata store"
        if self._registrar is None or not self._registrar.registered:
            return "not registered in the metadata store"
        return None
