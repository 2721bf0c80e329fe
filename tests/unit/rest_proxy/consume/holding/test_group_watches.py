"""``GroupWatches``: one watch per group however many members hold it open, stopped with the
last reference; every change it sees reaches the listener as (group, member id)."""

from __future__ import annotations

import asyncio

from yak.clock import FakeClock
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import GroupMember
from yak_rest_proxy.consume.holding.group_watch import GroupWatch
from yak_rest_proxy.consume.holding.group_watches import GroupWatches
from yak_rest_proxy.consume.holding.tasks import BackgroundTasks

KS = Keyspace("unit")


def live(watch: GroupWatch) -> bool:
    return watch.live


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_one_watch_per_group_stopped_with_its_last_reference() -> None:
    clock = FakeClock()
    store = MemoryMetadataStore(clock)
    tasks = BackgroundTasks()
    watches = GroupWatches(store, KS, clock=clock, tasks=tasks, listener=lambda g, m: None)
    first, second = watches.open("g"), watches.open("g")
    assert first is second
    await settle()
    assert live(first)
    watches.close("g")
    await settle()
    assert live(first)  # one reference left
    watches.close("g")
    await tasks.drain(1.0)
    assert not live(first)
    assert watches.open("g") is not first  # a new watch once the old one stopped
    await watches.stop()
    await store.aclose()


async def test_changes_reach_the_listener_with_their_group() -> None:
    clock = FakeClock()
    store = MemoryMetadataStore(clock)
    seen: list[tuple[str, str | None]] = []
    watches = GroupWatches(
        store, KS, clock=clock, tasks=BackgroundTasks(), listener=lambda g, m: seen.append((g, m))
    )
    watches.open("g")
    await settle()
    assert seen == [("g", None)]  # the load: any member may have changed
    record = GroupMember(member_id="m1", joined_at_ms=1)
    await store.put(KS.group_member("g", "m1"), record.encode())
    await settle()
    assert seen[-1] == ("g", "m1")
    await watches.stop()
    await store.aclose()
