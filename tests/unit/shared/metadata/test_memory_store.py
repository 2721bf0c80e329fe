"""What only the in-memory store can show: lease expiry on a fake clock, bounded history."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from yak.clock import FakeClock
from yak.errors import MetadataStoreError, RevisionCompactedError
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.store import EventKind, WatchEvent

WAIT_S = 5.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store(clock: FakeClock) -> AsyncIterator[MemoryMetadataStore]:
    store = MemoryMetadataStore(clock, history_limit=100)
    try:
        yield store
    finally:
        await store.aclose()


async def test_a_fresh_store_is_at_revision_one(store: MemoryMetadataStore) -> None:
    assert store.revision == 1
    assert (await store.range_prefix(b"")).revision == 1
    assert await store.put(b"k", b"v") == 2


async def test_lease_expires_exactly_at_its_ttl(
    store: MemoryMetadataStore, clock: FakeClock
) -> None:
    lease = await store.grant_lease(10)
    await store.put(b"k", b"v", lease=lease)
    clock.advance(9.999)
    assert await store.get(b"k") is not None
    clock.advance(0.001)
    assert await store.get(b"k") is None


async def test_expiry_needs_no_call_watchers_see_deletes_at_one_revision(
    store: MemoryMetadataStore, clock: FakeClock
) -> None:
    lease = await store.grant_lease(5)
    await store.put(b"s/a", b"1", lease=lease)
    await store.put(b"s/b", b"2", lease=lease)
    await store.put(b"s/c", b"3")
    async with store.watch_prefix(b"s/") as watch:
        clock.advance(5)  # only the store's timer task can notice
        got = [await asyncio.wait_for(anext(watch), WAIT_S) for _ in range(2)]
    assert got == [
        WatchEvent(EventKind.DELETE, b"s/a", b"", store.revision),
        WatchEvent(EventKind.DELETE, b"s/b", b"", store.revision),
    ]
    assert [kv.key for kv in (await store.range_prefix(b"s/")).kvs] == [b"s/c"]


async def test_keep_alive_moves_the_deadline(store: MemoryMetadataStore, clock: FakeClock) -> None:
    lease = await store.grant_lease(10)
    await store.put(b"k", b"v", lease=lease)
    clock.advance(8)
    assert await store.keep_alive_once(lease) == 10
    clock.advance(8)
    assert await store.get(b"k") is not None
    clock.advance(2)
    assert await store.get(b"k") is None


async def test_history_beyond_its_limit_counts_as_compacted() -> None:
    store = MemoryMetadataStore(FakeClock(), history_limit=3)
    try:
        revisions = [await store.put(b"k", b"%d" % i) for i in range(5)]
        with pytest.raises(RevisionCompactedError):
            async with store.watch_prefix(b"k", start_revision=revisions[1]) as watch:
                await anext(watch)
        async with store.watch_prefix(b"k", start_revision=revisions[2]) as watch:
            values = [(await anext(watch)).value for _ in range(3)]
        assert values == [b"2", b"3", b"4"]
    finally:
        await store.aclose()


async def test_compact_rejects_future_and_already_compacted_revisions(
    store: MemoryMetadataStore,
) -> None:
    current = await store.put(b"k", b"v")
    with pytest.raises(MetadataStoreError, match="future"):
        await store.compact(current + 1)
    await store.compact(current)
    with pytest.raises(RevisionCompactedError):
        await store.compact(current)


async def test_watch_from_a_future_revision_waits_for_it(store: MemoryMetadataStore) -> None:
    now = await store.put(b"k", b"0")
    async with store.watch_prefix(b"k", start_revision=now + 2) as watch:
        await store.put(b"k", b"1")
        await store.put(b"k", b"2")
        event = await asyncio.wait_for(anext(watch), WAIT_S)
    assert (event.value, event.mod_revision) == (b"2", now + 2)


async def test_lease_ttl_must_be_positive(store: MemoryMetadataStore) -> None:
    with pytest.raises(ValueError, match="positive"):
        await store.grant_lease(0)
