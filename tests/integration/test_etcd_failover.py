"""``EtcdMetadataStore`` over a real 3-member etcd cluster on 127.0.0.1 whose member in use is
SIGKILLed (or stopped, or paused): calls go on on another member, a watch resumes from its
last revision without losing or repeating an event, and a ``LeaseKeeper`` keeps its lease past
several TTLs."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from yak.errors import MetadataStoreError
from yak.etcd_cluster import EmbeddedEtcdCluster
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.lease_keeper import LeaseKeeper
from yak.metadata.store import WatchEvent

pytestmark = pytest.mark.integration

WAIT_S = 20.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedEtcdCluster]:
    with EmbeddedEtcdCluster(tmp_path / "etcd", 3, unsafe_no_fsync=True) as started:
        yield started


async def _next(watch_iter: object, n: int) -> list[WatchEvent]:
    events = []
    for _ in range(n):
        events.append(await asyncio.wait_for(anext(watch_iter), WAIT_S))  # type: ignore[call-overload]
    return events


async def _put_until_it_lands(store: EtcdMetadataStore, key: bytes, value: bytes) -> None:
    """Put as any writer would: when the paused member led the raft group, the proposal times
    out ("etcdserver: request timed out") until the others have elected a leader."""
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while True:
        try:
            await store.put(key, value)
            return
        except MetadataStoreError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.2)


async def test_the_member_in_use_dies_and_everything_goes_on(
    cluster: EmbeddedEtcdCluster,
) -> None:
    store = EtcdMetadataStore.from_url(cluster.endpoints, timeout_s=2.0)
    lost: list[object] = []
    try:
        lease = await store.grant_lease(3)
        await store.put(b"/f/registration", b"broker-0", lease=lease)
        async with (
            store.watch_prefix(b"/f/w/") as watch,
            LeaseKeeper(store, lease, 3, on_lost=lost.append) as keeper,
        ):
            for n in range(5):
                await store.put(f"/f/w/{n}".encode(), b"before")
            before = await _next(watch, 5)
            victim = cluster.index_of(store.port)
            await asyncio.to_thread(cluster.members[victim].kill)
            for n in range(5, 10):  # the first of these finds the member dead and moves on
                await store.put(f"/f/w/{n}".encode(), b"after")
            after = await _next(watch, 5)
            assert [e.key for e in before + after] == [f"/f/w/{n}".encode() for n in range(10)]
            revisions = [e.mod_revision for e in before + after]
            assert revisions == sorted(set(revisions))  # none lost, none repeated
            assert cluster.index_of(store.port) != victim
            await asyncio.sleep(3 * 3)  # three lease TTLs on the surviving members
            assert not keeper.lost
            assert not lost
            kept = await store.get(b"/f/registration")
            assert kept is not None
            assert kept.lease == lease
    finally:
        await store.aclose()


async def test_a_dead_first_member_is_skipped_from_the_start(
    cluster: EmbeddedEtcdCluster,
) -> None:
    await asyncio.to_thread(cluster.members[0].kill)
    store = EtcdMetadataStore.from_url(cluster.endpoints, timeout_s=2.0)
    try:
        revision = await store.put(b"/f/k", b"v")
        async with store.watch_prefix(b"/f/", start_revision=revision) as watch:
            (event,) = await _next(watch, 1)
            assert event.value == b"v"
        assert await store.keep_alive_once(await store.grant_lease(5)) > 0
    finally:
        await store.aclose()


async def test_a_watch_resumes_when_its_member_stops_cleanly(
    cluster: EmbeddedEtcdCluster,
) -> None:
    """SIGTERM: etcd ends the stream without an error; the watch still resumes."""
    store = EtcdMetadataStore.from_url(cluster.endpoints, timeout_s=2.0)
    other = EtcdMetadataStore.from_url(cluster.members[2].endpoint, timeout_s=2.0)
    try:
        async with store.watch_prefix(b"/s/") as watch:
            await other.put(b"/s/1", b"1")
            await _next(watch, 1)
            await asyncio.to_thread(cluster.members[cluster.index_of(store.port)].stop)
            await other.put(b"/s/2", b"2")  # nobody told the watch's store anything
            (event,) = await _next(watch, 1)
            assert event.key == b"/s/2"
    finally:
        await store.aclose()
        await other.aclose()


async def test_a_watch_leaves_a_member_that_stops_answering(
    cluster: EmbeddedEtcdCluster,
) -> None:
    """SIGSTOP: the connection stays open and silent (as behind a network partition); the
    HTTP/2 keepalive fails the stream and the watch resumes on another member."""
    store = EtcdMetadataStore.from_url(cluster.endpoints, timeout_s=2.0)
    other = EtcdMetadataStore.from_url(cluster.members[2].endpoint, timeout_s=2.0)
    paused = None
    try:
        async with store.watch_prefix(b"/p/") as watch:
            await other.put(b"/p/1", b"1")
            await _next(watch, 1)
            paused = cluster.members[cluster.index_of(store.port)].pid
            assert paused is not None
            assert paused != cluster.members[2].pid
            os.kill(paused, signal.SIGSTOP)
            await _put_until_it_lands(other, b"/p/2", b"2")  # the watch's store makes no call
            event = await asyncio.wait_for(anext(watch), 40)
            assert event.key == b"/p/2"
    finally:
        if paused is not None:
            os.kill(paused, signal.SIGCONT)
        await store.aclose()
        await other.aclose()


async def test_a_short_lease_outlives_a_paused_member(cluster: EmbeddedEtcdCluster) -> None:
    """A keep-alive waits a third of the TTL, not the store's 5 s, on a silent member."""
    store = EtcdMetadataStore.from_url(cluster.endpoints, timeout_s=5.0)
    paused = None
    try:
        lease = await store.grant_lease(3)
        await store.put(b"/l/registration", b"broker-0", lease=lease)
        async with LeaseKeeper(store, lease, 3) as keeper:
            paused = cluster.members[cluster.index_of(store.port)].pid
            assert paused is not None
            os.kill(paused, signal.SIGSTOP)
            await asyncio.sleep(3 * 3)
            assert not keeper.lost
            kept = await store.get(b"/l/registration")
            assert kept is not None
            assert kept.lease == lease
    finally:
        if paused is not None:
            os.kill(paused, signal.SIGCONT)
        await store.aclose()
