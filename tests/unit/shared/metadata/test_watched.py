"""WatchedPrefix: the load-then-watch lifecycle every etcd-following cache shares."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from tests.unit.shared.metadata.test_cache import FlakyStore
from yak.clock import FakeClock
from yak.errors import MetadataStoreError, RevisionCompactedError
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.store import EventKind, KeyValue, WatchEvent
from yak.metadata.watched import WatchedPrefix


class Copy:
    """A cache of every key under the prefix, fed by a WatchedPrefix."""

    def __init__(self, store: MemoryMetadataStore, clock: FakeClock) -> None:
        self.keys: dict[bytes, bytes] = {}
        self.loads = 0
        self.watched = WatchedPrefix(
            store, "p/", what="test", load=self.load, apply=self.apply, clock=clock
        )

    def load(self, kvs: Sequence[KeyValue]) -> None:
        self.loads += 1
        self.keys = {kv.key: kv.value for kv in kvs}

    def apply(self, event: WatchEvent) -> None:
        assert self.watched.revision == event.mod_revision  # set before the cache applies it
        if event.kind is EventKind.PUT:
            self.keys[event.key] = event.value
        else:
            self.keys.pop(event.key, None)


async def test_a_reload_after_compaction_replaces_what_the_gap_changed() -> None:
    clock = FakeClock()
    store = FlakyStore(clock, [RevisionCompactedError("compacted", revision=1)])
    await store.put("p/gone", b"1")
    await store.put("other/x", b"ignored")
    copy = Copy(store, clock)
    await copy.watched.start()
    try:
        assert copy.keys == {b"p/gone": b"1"}
        await store.delete("p/gone")  # lands while the watch is failing: only a reload sees it
        revision = await store.put("p/new", b"2")
        await copy.watched.wait_for_revision(revision, timeout_s=5)
        assert copy.loads == 2
        assert copy.keys == {b"p/new": b"2"}
    finally:
        await copy.watched.stop()


async def test_a_lost_watch_resumes_after_its_backoff_and_wakes_the_waiters() -> None:
    clock = FakeClock()
    store = FlakyStore(clock, [MetadataStoreError("connection lost")])
    copy = Copy(store, clock)
    await copy.watched.start()
    try:
        await store.failed.wait()
        await asyncio.sleep(0)  # the follower sees the failure and parks in its backoff
        assert bool(copy.watched.connected) is False
        waiter = asyncio.create_task(copy.watched.next_change())
        revision = await store.put("p/k", b"v")
        await asyncio.sleep(0)
        assert not waiter.done()  # nothing is applied while the watch is down
        clock.advance(0.1)
        await asyncio.wait_for(waiter, 5)
        assert copy.keys == {b"p/k": b"v"}
        assert copy.watched.revision == revision
        assert copy.watched.connected
        assert copy.loads == 1  # resumed from the last revision, not reloaded
    finally:
        await copy.watched.stop()
    assert not copy.watched.started
