"""TopicLookup: a topic made in etcd but not yet seen by the proxy's watch is found once the
cache catches up, instead of answering "not found" for the watch's lag; a topic whose record
the watch delivered but not yet its partition states is described whole."""

from __future__ import annotations

import asyncio

import pytest

from tests.lagging_store import LaggingStore
from yak.errors import UnknownTopicOrPartitionError
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import PartitionState, TopicRecord
from yak_rest_proxy.topics import TopicLookup

KS = Keyspace("c1")


def _topic(name: str, partitions: int = 1) -> TopicRecord:
    return TopicRecord(
        name=name,
        topic_id=f"id-{name}",
        partitions=partitions,
        replication_factor=1,
        created_at_ms=1,
    )


def _state(name: str, partition: int) -> PartitionState:
    return PartitionState(topic=name, partition=partition, leader=1, replicas=(1,), isr=(1,))


async def _started() -> tuple[LaggingStore, MetadataCache]:
    store = LaggingStore()
    cache = MetadataCache(store, KS)
    await cache.start()
    return store, cache


async def test_a_topic_the_watch_has_not_delivered_is_found_once_it_has() -> None:
    store, cache = await _started()
    try:
        store.gate.clear()
        await store.put(KS.topic("fresh"), _topic("fresh").encode())
        lookup = TopicLookup(cache, store, KS, timeout_s=5.0)
        pending = asyncio.create_task(lookup.record("fresh"))
        await asyncio.sleep(0.05)
        assert not pending.done()
        assert "fresh" not in cache.snapshot.topics
        store.gate.set()
        record = await asyncio.wait_for(pending, 5.0)
        assert record.name == "fresh"
    finally:
        await cache.stop()


async def test_concurrent_misses_share_one_etcd_read() -> None:
    store, cache = await _started()
    try:
        store.gate.clear()
        await store.put(KS.topic("fresh"), _topic("fresh").encode())
        lookup = TopicLookup(cache, store, KS, timeout_s=5.0)
        before = store.reads
        waiting = [asyncio.create_task(lookup.record("fresh")) for _ in range(10)]
        await asyncio.sleep(0.05)
        store.gate.set()
        records = await asyncio.wait_for(asyncio.gather(*waiting), 5.0)
        assert {r.name for r in records} == {"fresh"}
        assert store.reads - before == 1
    finally:
        await cache.stop()


async def test_a_topic_that_does_not_exist_is_still_not_found() -> None:
    store, cache = await _started()
    try:
        lookup = TopicLookup(cache, store, KS, timeout_s=5.0)
        with pytest.raises(UnknownTopicOrPartitionError, match="'nope' not found"):
            await asyncio.wait_for(lookup.record("nope"), 1.0)
    finally:
        await cache.stop()


async def test_a_watch_that_stays_behind_answers_not_found_after_the_timeout() -> None:
    store, cache = await _started()
    try:
        store.gate.clear()
        await store.put(KS.topic("late"), _topic("late").encode())
        lookup = TopicLookup(cache, store, KS, timeout_s=0.1)
        with pytest.raises(UnknownTopicOrPartitionError):
            await asyncio.wait_for(lookup.record("late"), 2.0)
        store.gate.set()
        assert (await asyncio.wait_for(lookup.record("late"), 2.0)).name == "late"
    finally:
        await cache.stop()


async def _record_seen_states_held(store: LaggingStore, cache: MetadataCache, name: str) -> None:
    """The topic's record in the cache, its two partition states written but held back."""
    await store.put(KS.topic(name), _topic(name, partitions=2).encode())
    await cache.wait_for(lambda snap: name in snap.topics, 5.0)
    store.gate.clear()
    for p in (0, 1):
        await store.put(KS.partition(name, p), _state(name, p).encode())


async def test_a_topic_whose_partitions_the_watch_has_not_delivered_is_described_whole() -> None:
    store, cache = await _started()
    try:
        await _record_seen_states_held(store, cache, "half")
        assert cache.snapshot.partitions_of("half") == []
        lookup = TopicLookup(cache, store, KS, timeout_s=5.0)
        pending = asyncio.create_task(lookup.described("half"))
        await asyncio.sleep(0.05)
        assert not pending.done()
        store.gate.set()
        record, partitions = await asyncio.wait_for(pending, 5.0)
        assert record.partitions == 2
        assert [s.partition for s in partitions] == [0, 1]
    finally:
        await cache.stop()


async def test_a_whole_topic_is_described_without_an_etcd_read() -> None:
    store, cache = await _started()
    try:
        await store.put(KS.topic("whole"), _topic("whole").encode())
        await store.put(KS.partition("whole", 0), _state("whole", 0).encode())
        await cache.wait_for(lambda snap: len(snap.partitions_of("whole")) == 1, 5.0)
        lookup = TopicLookup(cache, store, KS, timeout_s=5.0)
        before = store.reads
        _, partitions = await lookup.described("whole")
        assert len(partitions) == 1
        snapshot = await lookup.snapshot_of({"whole"})
        assert "whole" in snapshot.topics
        assert store.reads == before
    finally:
        await cache.stop()


async def test_many_topics_wait_for_a_named_topic_the_cache_holds_in_part() -> None:
    store, cache = await _started()
    try:
        await _record_seen_states_held(store, cache, "half")
        lookup = TopicLookup(cache, store, KS, timeout_s=5.0)
        pending = asyncio.create_task(lookup.snapshot_of({"half", "absent"}))
        await asyncio.sleep(0.05)
        assert not pending.done()
        store.gate.set()
        snapshot = await asyncio.wait_for(pending, 5.0)
        assert len(snapshot.partitions_of("half")) == 2
        assert "absent" not in snapshot.topics
    finally:
        await cache.stop()


async def test_a_miss_does_not_wait_for_writes_of_another_cluster() -> None:
    """Another cluster on the same etcd moves its revision with writes this watch never sees:
    a lookup that waited for that revision answered only at the timeout."""
    store, cache = await _started()
    try:
        await store.put(Keyspace("other").topic("theirs"), _topic("theirs").encode())
        lookup = TopicLookup(cache, store, KS, timeout_s=5.0)
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(UnknownTopicOrPartitionError):
            await lookup.record("nope")
        snapshot = await lookup.snapshot_of({"nope", "neither"})
        await lookup.sync_partitions([("nope", 0)])
        assert loop.time() - started < 1.0
        assert "theirs" not in snapshot.topics
    finally:
        await cache.stop()


async def test_a_lagging_watch_is_waited_for_past_another_clusters_writes() -> None:
    store, cache = await _started()
    try:
        store.gate.clear()
        await store.put(KS.topic("mine"), _topic("mine").encode())
        await store.put(KS.partition("mine", 0), _state("mine", 0).encode())
        await store.put(Keyspace("other").topic("theirs"), _topic("theirs").encode())
        lookup = TopicLookup(cache, store, KS, timeout_s=5.0)
        pending = asyncio.create_task(lookup.described("mine"))
        await asyncio.sleep(0.05)
        assert not pending.done()
        store.gate.set()
        record, partitions = await asyncio.wait_for(pending, 5.0)
        assert record.name == "mine"
        assert [s.partition for s in partitions] == [0]
    finally:
        await cache.stop()


async def test_a_moved_leader_is_read_once_the_watch_delivers_it() -> None:
    store, cache = await _started()
    try:
        await store.put(KS.topic("t"), _topic("t").encode())
        await store.put(KS.partition("t", 0), _state("t", 0).encode())
        await cache.wait_for(lambda snap: len(snap.partitions_of("t")) == 1, 5.0)
        store.gate.clear()
        moved = PartitionState(topic="t", partition=0, leader=2, replicas=(1, 2), isr=(2,))
        await store.put(KS.partition("t", 0), moved.encode())
        lookup = TopicLookup(cache, store, KS, timeout_s=5.0)
        pending = asyncio.create_task(lookup.sync_partitions([("t", 0)]))
        await asyncio.sleep(0.05)
        assert not pending.done()
        store.gate.set()
        await asyncio.wait_for(pending, 5.0)
        assert cache.snapshot.partitions_of("t")[0].leader == 2
    finally:
        await cache.stop()
