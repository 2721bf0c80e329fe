"""``ConsumerFetchSessions``: the Kafka listener's incremental fetch sessions (KIP-227).

A consumer fetches the same partitions from a broker round after round. With a session the
broker remembers them (``CachedPartition``: fetch offset, max bytes, leader epoch, and what
the consumer was last told — high watermark, log start offset, whether it failed), so:

- a **full** fetch (``session_epoch`` 0) names every partition; it creates a session when the
  cache has room (a random ``session_id`` in 1..2**31-1, answered; the next request carries
  epoch 1) and is answered every partition;
- an **incremental** fetch (``session_id`` and the expected epoch, then the next one, wrapping
  to 1 after 2**31-1) names only partitions that are new or whose position changed, and
  ``forgotten`` those no longer fetched; it is answered only the partitions with records, a
  changed high watermark or log start offset, or an error (errors are answered every round,
  as Kafka's ``IncrementalFetchContext`` does);
- refused, at the request level: an unknown ``session_id`` (evicted, or the broker restarted:
  nothing persists) is ``FETCH_SESSION_ID_NOT_FOUND`` (70), another epoch than expected
  ``INVALID_FETCH_SESSION_EPOCH`` (71); the client starts over with a full fetch;
- ``session_epoch`` -1 is sessionless (a ``session_id`` with it is closed: the final epoch),
  and a full fetch naming a ``session_id`` closes that session before creating the next.

Which partitions a round reads (``ConsumerFetchSession.due``): those named by the request and
those whose replica here disagrees with what the consumer was told or holds — high watermark
or log start offset moved, fetch offset below (or past) the high watermark, not led here, a
fenced epoch, or an error last time. The check reads a few attributes of each partition's
replica and allocates nothing, so an idle round reads no log and builds no partition.
Partitions answered with records move to the end of the session's order, so that a response
byte limit reached by the first ones does not starve the others (Kafka does the same).

The cache (Kafka's ``FetchSessionCache``): at most ``max_sessions`` sessions
(``max.incremental.fetch.session.cache.slots``, 1000); when full, a new session takes the slot
of the least recently used one if that one went unused for ``eviction_ms`` (120 s), else of
the smallest (then least recently used) one if the new one has more partitions; otherwise no
session is created and the full fetch is answered sessionless (``session_id`` 0: the client
keeps sending full fetches). Each session owns one ``FetchWaiter``, registered under its
partitions in the consumers' ``FetchWaiters`` (woken when a high watermark moves) while the
session lives, re-registered only when its set of partitions changes.

Metrics (``register_metrics``, read at scrape time): ``yak_broker_kafka_fetch_sessions`` (held
now), ``yak_broker_kafka_fetches_total{kind}`` (``sessionless``, ``full``, ``incremental``,
``refused``) and ``yak_broker_kafka_fetch_session_evictions_total``.

Single event loop, not thread-safe. Sessions are shared by every connection of the listener
(a session id is not tied to a connection, as in Kafka); nothing persists: a restarted broker
answers 70 and clients start over.
"""

from __future__ import annotations

import random
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from yak.errors import YakError
from yak.protocol.broker_wire import FetchedPartition, FetchPartition
from yak.types import TopicPartition
from yak_broker.replication.fetch_waiter import FetchWaiter, FetchWaiters
from yak_broker.replication.replica_roles import Replica
from yak_broker.replication.state.fetch_metadata import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    MAX_EPOCH,
    next_epoch,
)

__all__ = [
    "CachedPartition",
    "ConsumerFetchSession",
    "ConsumerFetchSessions",
    "FetchSessionIdNotFoundError",
    "FetchSessionsCollector",
    "InvalidFetchSessionEpochError",
    "register_metrics",
]

_Key = tuple[str, int]


class FetchSessionIdNotFoundError(YakError):
    """An incremental fetch of a session this broker does not hold (evicted, or restarted)."""

    code = "FETCH_SESSION_ID_NOT_FOUND"
    kafka_code = 70
    retriable = True
    http_status = 400


class InvalidFetchSessionEpochError(YakError):
    """An incremental fetch whose epoch is not the one its session expects."""

    code = "INVALID_FETCH_SESSION_EPOCH"
    kafka_code = 71
    retriable = True
    http_status = 400


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: the consumer's position and what it was last told."""

    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    leader_epoch: int
    high_watermark: int = -2  # -2: never told
    log_start_offset: int = -2
    failed: bool = False
    #: Named by the request being served: read this round whatever the replica says.
    named: bool = True

    def wanted(self) -> FetchPartition:
        tp = self.tp
        return FetchPartition(
            tp.topic, tp.partition, self.fetch_offset, self.max_bytes, self.leader_epoch
        )

    def must_answer(self, fetched: FetchedPartition) -> bool:
        """Whether an incremental answer carries ``fetched`` (see the module doc)."""
        return (
            fetched.error is not None
            or len(memoryview(fetched.records)) > 0
            or fetched.high_watermark != self.high_watermark
            or fetched.log_start_offset != self.log_start_offset
        )

    def stale(self, replica: Replica | None) -> bool:
        """Whether the replica here disagrees with what the consumer holds (no allocation)."""
        if self.named or self.failed or replica is None:
            return True
        machine = replica.leader
        if machine is None or machine.check_fetch_epoch(self.leader_epoch) is not None:
            return True
        log = replica.log
        high_watermark = log.high_watermark
        return (
            high_watermark != self.high_watermark
            or high_watermark != self.fetch_offset
            or log.log_start_offset != self.log_start_offset
        )


@dataclass(eq=False, slots=True)
class ConsumerFetchSession:
    """One consumer's session (see the module doc)."""

    session_id: int
    #: The epoch the next incremental request must carry.
    epoch: int
    last_used_ms: int
    partitions: dict[_Key, CachedPartition] = field(default_factory=dict)
    #: How many of the session's partitions each topic has (the READ check's topics).
    topics: dict[str, int] = field(default_factory=dict)
    closed: bool = False
    waiter: FetchWaiter | None = None
    watch: ExitStack | None = None
    #: The partition set changed since ``waiter`` was registered.
    rewatch: bool = True

    def update(self, named: Iterable[FetchPartition]) -> None:
        """Add the partitions a request names, or move them to its positions."""
        partitions = self.partitions
        for p in named:
            key = (p.topic, p.partition)
            cached = partitions.get(key)
            if cached is None:
                tp = TopicPartition(p.topic, p.partition)
                partitions[key] = CachedPartition(tp, p.offset, p.max_bytes, p.current_leader_epoch)
                self.topics[p.topic] = self.topics.get(p.topic, 0) + 1
                self.rewatch = True
            else:
                cached.fetch_offset = p.offset
                cached.max_bytes = p.max_bytes
                cached.leader_epoch = p.current_leader_epoch
                cached.named = True

    def forget(self, keys: Iterable[_Key]) -> list[_Key]:
        """Drop partitions from the session; those it held."""
        dropped = []
        for key in keys:
            if self.partitions.pop(key, None) is not None:
                dropped.append(key)
                left = self.topics[key[0]] - 1
                if left:
                    self.topics[key[0]] = left
                else:
                    del self.topics[key[0]]
                self.rewatch = True
        return dropped

    def due(self, hosted: Mapping[TopicPartition, Replica]) -> list[CachedPartition]:
        """The partitions to read this round, in the session's order (see the module doc)."""
        return [c for c in self.partitions.values() if c.stale(hosted.get(c.tp))]

    def commit(self, read: Iterable[FetchedPartition]) -> None:
        """``read`` was answered (or found unchanged): remember what each partition says."""
        partitions = self.partitions
        for fetched in read:
            key = (fetched.topic, fetched.partition)
            cached = partitions.get(key)
            if cached is None:
                continue
            cached.named = False
            cached.high_watermark = fetched.high_watermark
            cached.log_start_offset = fetched.log_start_offset
            cached.failed = fetched.error is not None
            if len(memoryview(fetched.records)):
                partitions[key] = partitions.pop(key)  # fairness: the others go first next time


class ConsumerFetchSessions:
    """The listener's sessions by id, least recently used first (see the module doc)."""

    def __init__(
        self,
        waiters: FetchWaiters[TopicPartition],
        *,
        max_sessions: int = 1000,
        eviction_ms: int = 120_000,
        rng: random.Random | None = None,
    ) -> None:
        self._waiters = waiters
        self._sessions: OrderedDict[int, ConsumerFetchSession] = OrderedDict()
        self.max_sessions = max_sessions
        self._eviction_ms = eviction_ms
        self._rng = rng if rng is not None else random.SystemRandom()
        #: Fetches served by kind (``sessionless``, ``full``, ``incremental``, ``refused``).
        self.fetches = dict.fromkeys(("sessionless", "full", "incremental", "refused"), 0)
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> ConsumerFetchSession | None:
        return self._sessions.get(session_id)

    def open(
        self, session_id: int, session_epoch: int, size: int, now_ms: int
    ) -> ConsumerFetchSession | None:
        """The session a request belongs to; None: served sessionless.

        ``size``: how many partitions a full fetch names. Raises
        ``FetchSessionIdNotFoundError`` or ``InvalidFetchSessionEpochError``.
        """
        if session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id:
                self.close(session_id)
            session = None if session_epoch == FINAL_EPOCH else self._create(size, now_ms)
            self.fetches["sessionless" if session is None else "full"] += 1
            return session
        session = self._sessions.get(session_id)
        if session is None:
            self.fetches["refused"] += 1
            raise FetchSessionIdNotFoundError(f"fetch session {session_id} is not known here")
        if session_epoch != session.epoch:
            self.fetches["refused"] += 1
            raise InvalidFetchSessionEpochError(
                f"fetch session {session_id} expects epoch {session.epoch}, got {session_epoch}"
            )
        session.epoch = next_epoch(session_epoch)
        session.last_used_ms = now_ms
        self._sessions.move_to_end(session_id)
        self.fetches["incremental"] += 1
        return session

    def waiter(self, session: ConsumerFetchSession) -> FetchWaiter:
        """The session's waiter, registered under its current partitions."""
        if session.waiter is None or session.rewatch:
            if session.watch is not None:
                session.watch.close()
            session.watch = ExitStack()
            keys = [cached.tp for cached in session.partitions.values()]
            session.waiter = session.watch.enter_context(self._waiters.watching(keys))
            session.rewatch = False
        return session.waiter

    def close(self, session_id: int) -> None:
        """Forget a session; a request parked on it is woken (and answers what it has)."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        session.closed = True
        if session.watch is not None:
            session.watch.close()
        if session.waiter is not None:
            session.waiter.wake()

    def close_all(self) -> None:
        for session_id in list(self._sessions):
            self.close(session_id)

    def _create(self, size: int, now_ms: int) -> ConsumerFetchSession | None:
        if len(self._sessions) >= self.max_sessions and not self._evict(size, now_ms):
            return None
        session_id = 0
        while session_id == 0 or session_id in self._sessions:
            session_id = self._rng.randrange(1, MAX_EPOCH)
        session = ConsumerFetchSession(session_id, 1, now_ms)
        self._sessions[session_id] = session
        return session

    def _evict(self, size: int, now_ms: int) -> bool:
        """Make room for a session of ``size`` partitions, Kafka's way (module doc)."""
        if not self._sessions:
            return False  # max_sessions 0: sessions are off
        oldest = next(iter(self._sessions.values()))
        if now_ms - oldest.last_used_ms > self._eviction_ms:
            victim = oldest
        else:  # the smallest, the least recently used among equals (min keeps the first)
            victim = min(self._sessions.values(), key=lambda s: len(s.partitions))
            if len(victim.partitions) >= size:
                return False
        self.close(victim.session_id)
        self.evictions += 1
        return True


class FetchSessionsCollector(Collector):
    """The sessions' gauge and counters, read at scrape time (``register_metrics``)."""

    def __init__(self, sessions: ConsumerFetchSessions) -> None:
        self.sessions = weakref.ref(sessions)

    def describe(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        return iter(())  # unchecked: one per registry, its cache replaced by a new listener

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        sessions = self.sessions()
        if sessions is None:
            return
        yield GaugeMetricFamily(
            "yak_broker_kafka_fetch_sessions",
            "Consumer fetch sessions (KIP-227) held by the broker's Kafka listener.",
            value=len(sessions),
        )
        fetches = CounterMetricFamily(
            "yak_broker_kafka_fetches",
            "Kafka consumer fetches by session kind (sessionless, full, incremental, refused).",
            labels=["kind"],
        )
        for kind, count in sessions.fetches.items():
            fetches.add_metric([kind], count)
        yield fetches
        yield CounterMetricFamily(
            "yak_broker_kafka_fetch_session_evictions",
            "Consumer fetch sessions evicted to make room for a new one.",
            value=sessions.evictions,
        )


_COLLECTORS: weakref.WeakKeyDictionary[CollectorRegistry, FetchSessionsCollector] = (
    weakref.WeakKeyDictionary()
)


def register_metrics(registry: CollectorRegistry, sessions: ConsumerFetchSessions) -> None:
    """Expose ``sessions`` in ``registry`` (a later listener's cache replaces an earlier's)."""
    collector = _COLLECTORS.get(registry)
    if collector is None:
        collector = _COLLECTORS[registry] = FetchSessionsCollector(sessions)
        registry.register(collector)
    collector.sessions = weakref.ref(sessions)
