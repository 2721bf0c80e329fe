"""MetadataCache costs what changed (issue 19): snapshots share unchanged topics' partition
states, and listeners subscribed at any time learn which key changed."""

from __future__ import annotations

from yak.clock import FakeClock
from yak.errors import RevisionCompactedError
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import KeyKind, Keyspace, ParsedKey
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import PartitionState, TopicRecord
from yak.metadata.snapshot import PartitionMap
from yak.metadata.store import KeyLike, Watch, as_key

KS = Keyspace("c1")


def topic(name: str) -> TopicRecord:
    return TopicRecord(
        name=name, topic_id=f"id-{name}", partitions=2, replication_factor=1, created_at_ms=1
    )


class _CompactedWatch(Watch):
    async def _start(self) -> None:
        self._finish(RevisionCompactedError("compacted", revision=1))

    async def _stop(self) -> None:
        pass


class CompactingStore(MemoryMetadataStore):
    """An in-memory store whose first watch falls behind compaction (the cache reloads)."""

    def __init__(self) -> None:
        super().__init__(FakeClock())
        self.compacted = False

    def watch_prefix(self, prefix: KeyLike, start_revision: int | None = None) -> Watch:
        if not self.compacted:
            self.compacted = True
            return _CompactedWatch(as_key(prefix), start_revision)
        return super().watch_prefix(prefix, start_revision)


def state(name: str, p: int, leader: int = 1) -> PartitionState:
    return PartitionState(topic=name, partition=p, leader=leader, replicas=(leader,), isr=(leader,))


async def test_a_snapshot_shares_the_topics_an_event_did_not_touch() -> None:
    store = MemoryMetadataStore(FakeClock())
    for p in range(3):
        await store.put(KS.partition("a", p), state("a", p).encode())
        await store.put(KS.partition("b", p), state("b", p).encode())
    cache = MetadataCache(store, KS)
    await cache.start()
    try:
        before = cache.snapshot
        assert isinstance(before.partitions, PartitionMap)
        revision = await store.put(KS.partition("b", 1), state("b", 1, leader=2).encode())
        after = await cache.wait_for_revision(revision, timeout_s=5)
        assert isinstance(after.partitions, PartitionMap)
        # Topic a was not copied; topic b was, and the older snapshot kept its states.
        assert after.partitions.of("a") is before.partitions.of("a")
        assert after.partitions.of("b") is not before.partitions.of("b")
        assert before.partitions[("b", 1)].leader == 1
        assert after.partitions[("b", 1)].leader == 2
        assert [s.partition for s in after.partitions_of("b")] == [0, 1, 2]

        await store.delete(KS.partition("a", 0))
        gone = await cache.wait_for_revision(store.revision, timeout_s=5)
        assert ("a", 0) not in gone.partitions
        assert ("a", 0) in before.partitions
        assert len(gone.partitions) == 5
        await store.delete_prefix(KS.topic_partitions_prefix("a"))
        emptied = await cache.wait_for_revision(store.revision, timeout_s=5)
        assert emptied.partitions_of("a") == []
        assert len(emptied.partitions) == 3
    finally:
        await cache.stop()


async def test_subscribers_learn_each_changed_key_until_they_unsubscribe() -> None:
    store = MemoryMetadataStore(FakeClock())
    cache = MetadataCache(store, KS)
    await cache.start()
    seen: list[ParsedKey | None] = []
    unsubscribe = cache.subscribe(seen.append)
    try:
        await store.put(KS.topic("t"), topic("t").encode())
        await store.put(KS.committed_offset("g", "t", 0), b'{"offset": 5}')  # not cached
        revision = await store.put(KS.partition("t", 0), state("t", 0).encode())
        await cache.wait_for_revision(revision, timeout_s=5)
        assert [(k.kind, k.topic) for k in seen if k is not None] == [
            (KeyKind.TOPIC, "t"),
            (KeyKind.PARTITION, "t"),
        ]
        unsubscribe()
        unsubscribe()  # idempotent
        revision = await store.put(KS.partition("t", 1), state("t", 1).encode())
        await cache.wait_for_revision(revision, timeout_s=5)
        assert len(seen) == 2
    finally:
        await cache.stop()


async def test_subscribers_are_told_of_a_reload_with_none() -> None:
    store = CompactingStore()
    cache = MetadataCache(store, KS)
    seen: list[ParsedKey | None] = []
    cache.subscribe(seen.append)
    await cache.start()
    assert seen == []  # the first load is no reload
    try:
        await store.put(KS.topic("early"), topic("early").encode())
        await cache.wait_for(lambda s: "early" in s.topics, timeout_s=5)
        assert seen == [None]
    finally:
        await cache.stop()
