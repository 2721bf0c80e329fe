"""Looking up a topic a request names, as both dialects answer it."""

from __future__ import annotations

from collections.abc import Iterable

from yak.errors import UnknownTopicOrPartitionError
from yak.metadata.cache import ClusterSnapshot, MetadataCache
from yak.metadata.catch_up import CatchUp
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import PartitionState, TopicRecord
from yak.metadata.store import MetadataStore
from yak.names import validate_topic_name

__all__ = ["TopicLookup", "topic_record"]

#: How long a request for a topic the cache does not know waits for the cache to hold what etcd
#: holds for it (a topic just made through another proxy) before it answers 404.
SYNC_TIMEOUT_S = 2.0


def topic_record(snapshot: ClusterSnapshot, topic: str) -> TopicRecord:
    """The topic's record, or UNKNOWN_TOPIC_OR_PARTITION (v2: 40401); a name that is not legal
    raises the name's validation error (v2: 40002)."""
    validate_topic_name(topic)
    record = snapshot.topics.get(topic)
    if record is None or record.deleting:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} not found", topic=topic)
    return record


def _complete(snapshot: ClusterSnapshot, topic: str) -> bool:
    record = snapshot.topics.get(topic)
    return record is not None and len(snapshot.partitions_of(topic)) >= record.partitions


class TopicLookup:
    """Topic lookups that read their own cluster's writes: a topic the cache does not know is
    looked up again once the cache holds what etcd holds for it now, so a topic made through
    one proxy is never "not found" on another for the watch's lag.

    A catch-up (``yak.metadata.catch_up``) reads the keys the lookup lacks (a topic's record,
    its partition states, a share group's record) and waits until the watch has delivered
    their newest change; keys etcd does not hold answer at once. Concurrent catch-ups for the
    same keys share one etcd read."""

    def __init__(
        self,
        cache: MetadataCache,
        store: MetadataStore,
        keyspace: Keyspace,
        *,
        timeout_s: float = SYNC_TIMEOUT_S,
    ) -> None:
        self._cache = cache
        self._keyspace = keyspace
        self._catch_up = CatchUp(cache, store, timeout_s=timeout_s)

    @property
    def keyspace(self) -> Keyspace:
        return self._keyspace

    async def record(self, topic: str) -> TopicRecord:
        """The topic's record as ``topic_record`` answers it, after a sync on a miss."""
        try:
            return topic_record(self._cache.snapshot, topic)
        except UnknownTopicOrPartitionError:
            await self.sync(self._keyspace.topic(topic))
            return topic_record(self._cache.snapshot, topic)

    async def described(self, topic: str) -> tuple[TopicRecord, list[PartitionState]]:
        """The topic's record and the partition states the cache holds for it. A record whose
        partitions the cache has not all seen yet (the controller writes the record, then the
        partition states, in two revisions; the watch may have delivered only the first) is read
        again after a sync, so a topic made through another proxy is never described with fewer
        partitions than it was acknowledged with."""
        record = await self.record(topic)
        partitions = self._cache.snapshot.partitions_of(topic)
        if len(partitions) < record.partitions:
            await self.sync(*self._topic_keys(topic))
            record = topic_record(self._cache.snapshot, topic)
            partitions = self._cache.snapshot.partitions_of(topic)
        return record, partitions

    async def snapshot_of(self, topics: set[str]) -> ClusterSnapshot:
        """The cache's snapshot, after one sync if it lacks any of ``topics`` or any of their
        partitions (the many-topics form of ``described``; names still unknown after the sync
        are not an error here)."""
        snapshot = self._cache.snapshot
        lacking = sorted(name for name in topics if not _complete(snapshot, name))
        if lacking:
            await self.sync(*(key for name in lacking for key in self._topic_keys(name)))
            snapshot = self._cache.snapshot
        return snapshot

    async def sync_partitions(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Catch up on the partition states of ``partitions`` (e.g. after a leader moved)."""
        topics = sorted({topic for topic, _ in partitions})
        await self.sync(*(self._keyspace.topic_partitions_prefix(topic) for topic in topics))

    async def sync(self, *wanted: str) -> None:
        """Wait (at most the timeout) until the cache holds what etcd holds now under each of
        ``wanted``: keys, or prefixes (``yak.metadata.catch_up``)."""
        await self._catch_up.sync(*wanted)

    def _topic_keys(self, topic: str) -> tuple[str, str]:
        return self._keyspace.topic(topic), self._keyspace.topic_partitions_prefix(topic)
