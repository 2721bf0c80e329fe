"""A local, always-current copy of the cluster metadata, fed by one etcd watch.

``MetadataCache`` loads ``brokers/``, ``broker-records/``, ``decommissions/``, ``topics/``,
``partitions/`` and ``controller`` of one cluster with a range read, then follows the cluster
prefix with a watch from the read's revision + 1, so no change is missed between the two.
Readers get an immutable ``ClusterSnapshot`` that names the etcd revision it reflects; a reader
that wrote something can ``wait_for_revision`` to see its own write. If the watch falls behind
etcd's compaction the cache reloads from scratch; if etcd is unreachable it retries with
backoff and keeps serving the last snapshot (``connected`` tells which): the lifecycle of
``yak.metadata.watched``.

``on_change(parsed_key)`` is called after each event the cache applied (the snapshot is built
only when read, so a burst of events costs no copy each); ``on_reload(snapshot)`` after each
load but the first, since events may have been missed in between. ``subscribe(listener)`` adds
more such listeners at any time (the coordinator's reconciler, broker recorder and group
coordinator, for each term): ``listener(parsed_key)`` after each event, ``listener(None)``
after a reload.

Building a snapshot costs the number of topics and brokers, not of partitions: partition states
are kept per topic, and a snapshot shares each topic's states with the cache until an event
changes that topic, which then copies that topic's states only (``PartitionMap``). The snapshot
and its map are plain values defined in ``yak.metadata.snapshot`` (re-exported here), so that
pure decisions can take a snapshot without importing the cache, its store and asyncio.

A value that fails validation is logged and treated as absent rather than stopping the cache.
Single event loop; readers in the same loop may call any method concurrently.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from types import MappingProxyType

from pydantic import ValidationError

from yak.clock import Clock
from yak.errors import KafkaTimeoutError
from yak.metadata.keyspace import KeyKind, Keyspace, ParsedKey
from yak.metadata.models import (
    BrokerDecommission,
    BrokerRecord,
    BrokerRegistration,
    ControllerRecord,
    PartitionState,
    ShareGroupRecord,
    TopicRecord,
)
from yak.metadata.snapshot import ClusterSnapshot, PartitionMap
from yak.metadata.store import EventKind, KeyValue, MetadataStore, WatchEvent
from yak.metadata.watched import WatchedPrefix

__all__ = ["ClusterSnapshot", "MetadataCache", "MetadataListener", "PartitionMap"]

log = logging.getLogger(__name__)

_CACHED_KINDS = {
    KeyKind.BROKER,
    KeyKind.BROKER_RECORD,
    KeyKind.DECOMMISSION,
    KeyKind.TOPIC,
    KeyKind.PARTITION,
    KeyKind.CONTROLLER,
    KeyKind.SHARE_GROUP,
}


#: Told what changed: the key of an applied event, or None after a reload (anything may have).
MetadataListener = Callable[[ParsedKey | None], None]


class MetadataCache:
    """Follows one cluster's metadata in etcd; see the module docstring."""

    def __init__(
        self,
        store: MetadataStore,
        keyspace: Keyspace,
        *,
        clock: Clock | None = None,
        on_change: Callable[[ParsedKey], None] | None = None,
        on_reload: Callable[[ClusterSnapshot], None] | None = None,
    ) -> None:
        self._keyspace = keyspace
        self._on_change = on_change
        self._on_reload = on_reload
        self._listeners: list[MetadataListener] = []
        self._loaded = False
        self._watched = WatchedPrefix(
            store, keyspace.root, what="metadata", load=self._load, apply=self._apply, clock=clock
        )
        self._controller: ControllerRecord | None = None
        self._brokers: dict[int, BrokerRegistration] = {}
        self._topics: dict[str, TopicRecord] = {}
        #: Partition states by topic; a topic's dict is only changed in place while it is in
        #: ``_owned`` (not yet handed to a snapshot), else copied first (see ``PartitionMap``).
        self._partitions: dict[str, dict[int, PartitionState]] = {}
        self._owned: set[str] = set()
        self._decommissions: dict[int, BrokerDecommission] = {}
        self._broker_records: dict[int, BrokerRecord] = {}
        self._share_groups: dict[str, ShareGroupRecord] = {}
        self._snapshot: ClusterSnapshot | None = None

    @property
    def snapshot(self) -> ClusterSnapshot:
        """The current metadata (a new immutable object after every change)."""
        if self._snapshot is None:
            self._snapshot = ClusterSnapshot(
                revision=self._watched.revision,
                controller=self._controller,
                brokers=MappingProxyType(dict(self._brokers)),
                topics=MappingProxyType(dict(self._topics)),
                partitions=PartitionMap(dict(self._partitions)),
                decommissions=MappingProxyType(dict(self._decommissions)),
                broker_records=MappingProxyType(dict(self._broker_records)),
                share_groups=MappingProxyType(dict(self._share_groups)),
            )
            self._owned.clear()  # every topic's states are shared with the snapshot now
        return self._snapshot

    @property
    def revision(self) -> int:
        return self._watched.revision

    @property
    def connected(self) -> bool:
        """Whether the watch is open (false while etcd is unreachable)."""
        return self._watched.connected

    def subscribe(self, listener: MetadataListener) -> Callable[[], None]:
        """Call ``listener`` after each applied event (its key) and each reload (None) from now
        on; returns the function that unsubscribes it."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    async def start(self) -> None:
        """Load the metadata (raises MetadataStoreError if etcd is down) and start following."""
        await self._watched.start()

    async def stop(self) -> None:
        await self._watched.stop()

    async def wait_for(
        self, predicate: Callable[[ClusterSnapshot], bool], timeout_s: float
    ) -> ClusterSnapshot:
        """Wait until ``predicate(snapshot)`` holds; raise KafkaTimeoutError after the timeout."""
        async with asyncio.timeout(timeout_s):
            while True:
                snapshot = self.snapshot
                if predicate(snapshot):
                    return snapshot
                await self._watched.next_change()

    async def wait_for_revision(self, revision: int, timeout_s: float = 10.0) -> ClusterSnapshot:
        """Wait until the cache reflects at least etcd ``revision`` (e.g. one's own write)."""
        try:
            return await self.wait_for(lambda s: s.revision >= revision, timeout_s)
        except TimeoutError as exc:
            raise KafkaTimeoutError(
                f"metadata cache at revision {self.revision}, waited {timeout_s} s for {revision}"
            ) from exc

    # -- internals --------------------------------------------------------------------------

    def _load(self, kvs: Sequence[KeyValue]) -> None:
        self._controller, self._brokers, self._topics, self._partitions = None, {}, {}, {}
        self._decommissions, self._broker_records, self._owned = {}, {}, set()
        self._share_groups = {}
        self._snapshot = None
        for kv in kvs:
            self._apply_put(kv.key, kv.value)
        if self._loaded:
            if self._on_reload is not None:
                self._on_reload(self.snapshot)
            for listener in list(self._listeners):
                listener(None)
        self._loaded = True

    def _apply(self, event: WatchEvent) -> None:
        parsed = self._parse(event.key)
        if parsed is not None:
            if event.kind is EventKind.PUT:
                self._apply_put(event.key, event.value, parsed)
            else:
                self._apply_delete(parsed)
        self._snapshot = None
        if parsed is None:
            return
        if self._on_change is not None:
            self._on_change(parsed)
        for listener in list(self._listeners):
            listener(parsed)

    def _parse(self, key: bytes) -> ParsedKey | None:
        parsed = self._keyspace.parse(key)
        return parsed if parsed is not None and parsed.kind in _CACHED_KINDS else None

    def _apply_put(self, key: bytes, value: bytes, parsed: ParsedKey | None = None) -> None:
        parsed = parsed if parsed is not None else self._parse(key)
        if parsed is None:
            return
        try:
            self._store_value(parsed, value)
        except ValidationError as exc:
            log.error("ignoring malformed metadata at %s: %s", key.decode(errors="replace"), exc)
            self._apply_delete(parsed)

    def _store_value(self, parsed: ParsedKey, value: bytes) -> None:
        match parsed.kind:
            case KeyKind.BROKER:
                assert parsed.broker_id is not None
                self._brokers[parsed.broker_id] = BrokerRegistration.decode(value)
            case KeyKind.BROKER_RECORD:
                assert parsed.broker_id is not None
                self._broker_records[parsed.broker_id] = BrokerRecord.decode(value)
            case KeyKind.DECOMMISSION:
                assert parsed.broker_id is not None
                self._decommissions[parsed.broker_id] = BrokerDecommission.decode(value)
            case KeyKind.TOPIC:
                assert parsed.topic is not None
                self._topics[parsed.topic] = TopicRecord.decode(value)
            case KeyKind.PARTITION:
                assert parsed.topic is not None
                assert parsed.partition is not None
                state = PartitionState.decode(value)
                self._topic_states(parsed.topic)[parsed.partition] = state
            case KeyKind.CONTROLLER:
                self._controller = ControllerRecord.decode(value)
            case KeyKind.SHARE_GROUP:
                assert parsed.group is not None
                self._share_groups[parsed.group] = ShareGroupRecord.decode(value)

    def _apply_delete(self, parsed: ParsedKey) -> None:
        match parsed.kind:
            case KeyKind.BROKER:
                self._brokers.pop(parsed.broker_id or 0, None)
            case KeyKind.BROKER_RECORD:
                self._broker_records.pop(parsed.broker_id or 0, None)
            case KeyKind.DECOMMISSION:
                self._decommissions.pop(parsed.broker_id or 0, None)
            case KeyKind.TOPIC:
                self._topics.pop(parsed.topic or "", None)
            case KeyKind.PARTITION:
                topic, partition = parsed.topic or "", parsed.partition or 0
                if partition in self._partitions.get(topic, {}):
                    states = self._topic_states(topic)
                    del states[partition]
                    if not states:
                        del self._partitions[topic]
                        self._owned.discard(topic)
            case KeyKind.CONTROLLER:
                self._controller = None
            case KeyKind.SHARE_GROUP:
                self._share_groups.pop(parsed.group or "", None)

    def _topic_states(self, topic: str) -> dict[int, PartitionState]:
        """``topic``'s states, to change: copied first if a snapshot shares them."""
        states = self._partitions.get(topic)
        if states is None or topic not in self._owned:
            states = self._partitions[topic] = dict(states or {})
            self._owned.add(topic)
        return states
