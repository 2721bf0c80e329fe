"""Looking up a topic a request names, as both dialects answer it."""

from __future__ import annotations

import asyncio

from yak.errors import KafkaTimeoutError, MetadataStoreError, UnknownTopicOrPartitionError
from yak.metadata.cache import ClusterSnapshot, MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import PartitionState, TopicRecord
from yak.metadata.store import MetadataStore
from yak.names import validate_topic_name

__all__ = ["TopicLookup", "topic_record"]

#: How long a request for a topic the cache does not know waits for the cache to reach etcd's
#: current revision (a topic just made through another proxy) before it answers 404.
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
    looked up again once the cache has caught up with etcd's revision of now, so a topic made
    through one proxy is never "not found" on another for the watch's lag. Concurrent misses
    share one etcd read."""

    def __init__(
        self,
        cache: MetadataCache,
        store: MetadataStore,
        keyspace: Keyspace,
        *,
        timeout_s: float = SYNC_TIMEOUT_S,
    ) -> None:
        self._cache = cache
        self._store = store
        self._keyspace = keyspace
        self._timeout_s = timeout_s
        self._sync: asyncio.Future[None] | None = None

    async def record(self, topic: str) -> TopicRecord:
        """The topic's record as ``topic_record`` answers it, after a sync on a miss."""
        try:
            return topic_record(self._cache.snapshot, topic)
        except UnknownTopicOrPartitionError:
            await self.sync()
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
            await self.sync()
            record = topic_record(self._cache.snapshot, topic)
            partitions = self._cache.snapshot.partitions_of(topic)
        return record, partitions

    async def snapshot_of(self, topics: set[str]) -> ClusterSnapshot:
        """The cache's snapshot, after one sync if it lacks any of ``topics`` or any of their
        partitions (the many-topics form of ``described``; names still unknown after the sync
        are not an error here)."""
        snapshot = self._cache.snapshot
        if not all(_complete(snapshot, name) for name in topics):
            await self.sync()
            snapshot = self._cache.snapshot
        return snapshot

    async def sync(self) -> None:
        """Wait (at most the timeout) until the cache reflects etcd's current revision; an etcd
        that does not answer leaves the cache as it is."""
        if self._sync is None:
            self._sync = asyncio.ensure_future(self._catch_up())
            self._sync.add_done_callback(self._done)
        await asyncio.shield(self._sync)

    def _done(self, sync: asyncio.Future[None]) -> None:
        self._sync = None
        if not sync.cancelled():
            sync.exception()

    async def _catch_up(self) -> None:
        try:
            async with asyncio.timeout(self._timeout_s):
                now = await self._store.range_prefix(self._keyspace.topics_prefix + "\x00")
            await self._cache.wait_for_revision(now.revision, self._timeout_s)
        except (TimeoutError, KafkaTimeoutError, MetadataStoreError):
            return
