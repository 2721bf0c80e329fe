"""CatchUp: a cache is brought up to what etcd holds under named keys — waiting for the watch
only when etcd holds something newer there, never for writes elsewhere on the same etcd."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.lagging_store import LaggingStore
from yak.errors import MetadataStoreError
from yak.metadata.cache import MetadataCache
from yak.metadata.catch_up import CatchUp
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import PartitionState, TopicRecord
from yak.metadata.store import KeyLike, KeyValue

KS = Keyspace("c1")
OTHER = Keyspace("c2")


def _topic(name: str, partitions: int = 1) -> bytes:
    return TopicRecord(
        name=name,
        topic_id=f"id-{name}",
        partitions=partitions,
        replication_factor=1,
        created_at_ms=1,
    ).encode()


def _state(name: str, partition: int, leader: int = 1) -> bytes:
    return PartitionState(
        topic=name, partition=partition, leader=leader, replicas=(leader,), isr=(leader,)
    ).encode()


@pytest.fixture
async def lagging() -> AsyncIterator[tuple[LaggingStore, MetadataCache]]:
    store = LaggingStore()
    cache = MetadataCache(store, KS)
    await cache.start()
    try:
        yield store, cache
    finally:
        await cache.stop()


async def test_keys_etcd_does_not_hold_answer_at_once_whatever_else_was_written(
    lagging: tuple[LaggingStore, MetadataCache],
) -> None:
    store, cache = lagging
    await store.put(OTHER.topic("theirs"), _topic("theirs"))  # etcd's newest revision
    catch_up = CatchUp(cache, store, timeout_s=5.0)
    async with asyncio.timeout(1.0):
        await catch_up.sync(KS.topic("absent"), KS.topic_partitions_prefix("absent"))
    assert cache.revision < (await store.range_prefix(OTHER.root)).revision


async def test_a_key_the_watch_has_not_delivered_is_waited_for(
    lagging: tuple[LaggingStore, MetadataCache],
) -> None:
    store, cache = lagging
    store.gate.clear()
    await store.put(KS.topic("fresh"), _topic("fresh"))
    await store.put(OTHER.topic("theirs"), _topic("theirs"))
    pending = asyncio.create_task(CatchUp(cache, store, timeout_s=5.0).sync(KS.topic("fresh")))
    await asyncio.sleep(0.05)
    assert not pending.done()
    store.gate.set()
    await asyncio.wait_for(pending, 5.0)
    assert "fresh" in cache.snapshot.topics


async def test_a_prefix_waits_for_its_newest_key(
    lagging: tuple[LaggingStore, MetadataCache],
) -> None:
    store, cache = lagging
    await store.put(KS.topic("t"), _topic("t", partitions=2))
    await store.put(KS.partition("t", 0), _state("t", 0))
    await cache.wait_for(lambda snap: len(snap.partitions_of("t")) == 1, 5.0)
    store.gate.clear()
    await store.put(KS.partition("t", 1), _state("t", 1))
    await store.put(KS.partition("t", 0), _state("t", 0, leader=2))
    pending = asyncio.create_task(
        CatchUp(cache, store, timeout_s=5.0).sync(KS.topic_partitions_prefix("t"))
    )
    await asyncio.sleep(0.05)
    assert not pending.done()
    store.gate.set()
    await asyncio.wait_for(pending, 5.0)
    assert [s.leader for s in cache.snapshot.partitions_of("t")] == [2, 1]


async def test_a_watch_that_stays_behind_leaves_the_cache_as_it_is_after_the_timeout(
    lagging: tuple[LaggingStore, MetadataCache],
) -> None:
    store, cache = lagging
    store.gate.clear()
    await store.put(KS.topic("late"), _topic("late"))
    loop = asyncio.get_running_loop()
    started = loop.time()
    await CatchUp(cache, store, timeout_s=0.2).sync(KS.topic("late"))
    assert 0.2 <= loop.time() - started < 2.0
    assert "late" not in cache.snapshot.topics


async def test_an_etcd_that_fails_leaves_the_cache_as_it_is(
    lagging: tuple[LaggingStore, MetadataCache],
) -> None:
    _, cache = lagging

    class Failing(LaggingStore):
        async def get(self, key: KeyLike) -> KeyValue | None:
            raise MetadataStoreError("etcd is down")

    failing = Failing()
    await failing.put(KS.topic("any"), _topic("any"))
    async with asyncio.timeout(1.0):
        await CatchUp(cache, failing, timeout_s=5.0).sync(KS.topic("any"))
    assert "any" not in cache.snapshot.topics


async def test_concurrent_catch_ups_of_the_same_keys_share_one_read(
    lagging: tuple[LaggingStore, MetadataCache],
) -> None:
    store, cache = lagging
    store.gate.clear()
    await store.put(KS.topic("fresh"), _topic("fresh"))
    catch_up = CatchUp(cache, store, timeout_s=5.0)
    before = store.reads
    same = [asyncio.create_task(catch_up.sync(KS.topic("fresh"))) for _ in range(10)]
    other = asyncio.create_task(catch_up.sync(KS.topic("other")))
    await asyncio.sleep(0.05)
    assert other.done()  # nothing in etcd: not held behind the others
    store.gate.set()
    await asyncio.wait_for(asyncio.gather(*same), 5.0)
    assert store.reads - before == 2
    await catch_up.sync(KS.topic("fresh"))  # done ones are not reused: a new read
    assert store.reads - before == 3
