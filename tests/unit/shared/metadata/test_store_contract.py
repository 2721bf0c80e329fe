"""One contract, two stores: every test runs on MemoryMetadataStore and on real etcd.

The etcd flavour shares the session's etcd, so tests use keys under their own prefix and only
compare revisions with each other. Time: the memory store runs on a FakeClock that the test
advances; with etcd real time passes, so tests that need it are few and short.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from yak.clock import FakeClock, SystemClock
from yak.errors import MetadataStoreError, RevisionCompactedError
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.lease_keeper import LeaseKeeper
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.store import (
    Compare,
    CompareOp,
    CompareTarget,
    DeleteOp,
    DeleteResponse,
    EventKind,
    GetOp,
    GetResponse,
    KeyValue,
    LeaseExpiredError,
    MetadataStore,
    PutOp,
    PutResponse,
    Watch,
    WatchEvent,
)

WAIT_S = 10.0  # upper bound for anything event-driven; a pass takes milliseconds


@dataclass
class Harness:
    """A store under test, a key prefix of its own, and a way to let time pass."""

    store: MetadataStore
    prefix: str
    clock: FakeClock | None  # None: real time (etcd)

    def key(self, name: str) -> bytes:
        return f"{self.prefix}{name}".encode()

    async def let_time_pass(self, seconds: float, steps: int = 10) -> None:
        """Advance the fake clock in steps, letting woken tasks run; or really wait."""
        if self.clock is None:
            await asyncio.sleep(seconds)
            return
        for _ in range(steps):
            self.clock.advance(seconds / steps)
            for _ in range(10):
                await asyncio.sleep(0)


@pytest.fixture(params=["memory", pytest.param("etcd", marks=pytest.mark.integration)])
async def h(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    prefix = f"/contract/{uuid.uuid4().hex}/"
    store: MetadataStore
    clock: FakeClock | None = None
    if request.param == "memory":
        clock = FakeClock()
        store = MemoryMetadataStore(clock)
    else:
        store = EtcdMetadataStore.from_url(request.getfixturevalue("etcd").endpoint)
    try:
        yield Harness(store, prefix, clock)
    finally:
        await store.aclose()


async def next_event(watch: Watch) -> WatchEvent:
    return await asyncio.wait_for(anext(watch), WAIT_S)


async def events(watch: Watch, count: int) -> list[WatchEvent]:
    return [await next_event(watch) for _ in range(count)]


# -- keys and revisions -----------------------------------------------------------------------


async def test_put_then_get_reports_value_and_revisions(h: Harness) -> None:
    first = await h.store.put(h.key("a"), b"1")
    assert await h.store.get(h.key("a")) == KeyValue(h.key("a"), b"1", first, first, 1, 0)
    second = await h.store.put(h.key("a"), b"2")
    assert second > first
    assert await h.store.get(h.key("a")) == KeyValue(h.key("a"), b"2", first, second, 2, 0)


async def test_missing_key_reads_as_none(h: Harness) -> None:
    assert await h.store.get(h.key("nothing")) is None


async def test_str_and_bytes_name_the_same_key(h: Harness) -> None:
    await h.store.put(f"{h.prefix}k", b"v")
    found = await h.store.get(h.key("k"))
    assert found is not None
    assert found.value == b"v"


async def test_range_prefix_returns_its_keys_in_order_with_the_revision(h: Harness) -> None:
    for name in ["b", "a", "c/x", "c"]:
        await h.store.put(h.key(name), name.encode())
    last = await h.store.put(h.prefix.rstrip("/") + "-sibling", b"not under the prefix")
    result = await h.store.range_prefix(h.prefix)
    assert [kv.key for kv in result.kvs] == [h.key(n) for n in ["a", "b", "c", "c/x"]]
    assert [kv.value for kv in result.kvs] == [b"a", b"b", b"c", b"c/x"]
    assert result.revision == last


async def test_revisions_increase_with_every_change_only(h: Harness) -> None:
    revisions = [await h.store.put(h.key(str(i)), b"x") for i in range(3)]
    assert revisions == sorted(set(revisions))
    before = (await h.store.range_prefix(h.prefix)).revision
    assert await h.store.delete(h.key("missing")) is False
    assert await h.store.delete_prefix(h.key("missing/")) == 0
    assert (await h.store.range_prefix(h.prefix)).revision == before


async def test_delete_and_delete_prefix(h: Harness) -> None:
    for name in ["a", "d/1", "d/2", "d/3"]:
        await h.store.put(h.key(name), b"x")
    assert await h.store.delete(h.key("a")) is True
    assert await h.store.delete(h.key("a")) is False
    assert await h.store.delete_prefix(h.key("d/")) == 3
    assert (await h.store.range_prefix(h.prefix)).kvs == ()


async def test_prefixes_ending_in_ff_bytes_cover_exactly_their_keys(h: Harness) -> None:
    prefix = h.key("bin/") + b"\xff"
    for key in [prefix, prefix + b"\x00", prefix + b"\xff\xff", h.key("bin/\u00ff")]:
        await h.store.put(key, b"x")
    found = [kv.key for kv in (await h.store.range_prefix(prefix)).kvs]
    assert found == [prefix, prefix + b"\x00", prefix + b"\xff\xff"]


# -- transactions ---------------------------------------------------------------------------


async def test_create_if_absent_succeeds_once_then_reads_the_winner(h: Harness) -> None:
    key = h.key("leader")
    won = await h.store.txn([Compare.absent(key)], [PutOp(key, b"me")], [GetOp(key)])
    assert won.succeeded
    assert won.responses == (PutResponse(won.revision),)
    lost = await h.store.txn([Compare.absent(key)], [PutOp(key, b"you")], [GetOp(key)])
    assert not lost.succeeded
    assert lost.revision == won.revision  # a read-only branch changes nothing
    (response,) = lost.responses
    assert isinstance(response, GetResponse)
    assert [kv.value for kv in response.kvs] == [b"me"]


async def test_concurrent_creators_exactly_one_wins(h: Harness) -> None:
    key = h.key("race")
    results = await asyncio.gather(
        *(h.store.txn([Compare.absent(key)], [PutOp(key, b"%d" % i)]) for i in range(8))
    )
    winners = [i for i, result in enumerate(results) if result.succeeded]
    assert len(winners) == 1
    stored = await h.store.get(key)
    assert stored is not None
    assert stored.value == b"%d" % winners[0]


async def test_compare_on_mod_revision_rejects_a_stale_writer(h: Harness) -> None:
    key = h.key("partition")
    seen = await h.store.put(key, b"epoch-1")
    await h.store.put(key, b"epoch-2")  # someone else moved it on
    stale = await h.store.txn([Compare.mod_revision(key, seen)], [PutOp(key, b"stale")])
    assert not stale.succeeded
    current = await h.store.get(key)
    assert current is not None
    fresh = await h.store.txn(
        [Compare.mod_revision(key, current.mod_revision)], [PutOp(key, b"epoch-3")]
    )
    assert fresh.succeeded
    assert (await h.store.get(key)) == current._replace(
        value=b"epoch-3", mod_revision=fresh.revision, version=current.version + 1
    )


async def test_a_compare_over_a_prefix_holds_for_every_key_under_it(h: Harness) -> None:
    members, other = h.key("g/members/"), h.key("g/membersx")
    await h.store.put(other, b"not under the prefix")
    assert (await h.store.txn([Compare.none_under(members)], [])).succeeded
    revision = await h.store.put(members + b"m-1", b"1")
    assert not (await h.store.txn([Compare.none_under(members)], [])).succeeded
    stale = Compare(members, CompareTarget.MOD_REVISION, CompareOp.LESS, revision, prefix=True)
    fresh = Compare(members, CompareTarget.MOD_REVISION, CompareOp.LESS, revision + 1, prefix=True)
    assert not (await h.store.txn([stale], [])).succeeded
    assert (await h.store.txn([fresh], [])).succeeded
    await h.store.put(members + b"m-2", b"2")
    assert not (await h.store.txn([fresh], [])).succeeded  # one key of two fails it
    await h.store.delete_prefix(members)
    assert (await h.store.txn([Compare.none_under(members)], [])).succeeded


async def test_compare_on_value_version_and_ordering(h: Harness) -> None:
    key = h.key("k")
    assert not (await h.store.txn([Compare.value(key, b"")], [])).succeeded  # absent: false
    assert (await h.store.txn([Compare.version(key, 0)], [])).succeeded
    await h.store.put(key, b"b")
    checks = {
        Compare.value(key, b"b"): True,
        Compare.value(key, b"a", CompareOp.GREATER): True,
        Compare.value(key, b"b", CompareOp.NOT_EQUAL): False,
        Compare.version(key, 1): True,
        Compare.version(key, 2, CompareOp.LESS): True,
        Compare.create_revision(key, 0, CompareOp.GREATER): True,
    }
    for compare, expected in checks.items():
        assert (await h.store.txn([compare], [])).succeeded is expected, compare


async def test_txn_writes_all_its_ops_at_one_revision(h: Harness) -> None:
    await h.store.put(h.key("old/1"), b"x")
    await h.store.put(h.key("old/2"), b"x")
    result = await h.store.txn(
        [],
        [PutOp(h.key("a"), b"1"), PutOp(h.key("b"), b"2"), DeleteOp(h.key("old/"), prefix=True)],
    )
    assert result.succeeded
    assert result.responses == (
        PutResponse(result.revision),
        PutResponse(result.revision),
        DeleteResponse(2),
    )
    kvs = (await h.store.range_prefix(h.prefix)).kvs
    assert [(kv.key, kv.mod_revision) for kv in kvs] == [
        (h.key("a"), result.revision),
        (h.key("b"), result.revision),
    ]


async def test_txn_refuses_a_key_written_twice_or_too_many_ops(h: Harness) -> None:
    twice = [PutOp(h.key("dup"), b"1"), PutOp(h.key("dup"), b"2")]
    with pytest.raises(MetadataStoreError, match="duplicate key"):
        await h.store.txn([], twice)
    with pytest.raises(MetadataStoreError, match="duplicate key"):
        await h.store.txn([], [PutOp(h.key("dup"), b"1"), DeleteOp(h.key("dup"))])
    many = [PutOp(h.key(f"many/{i}"), b"x") for i in range(129)]
    with pytest.raises(MetadataStoreError, match="too many operations"):
        await h.store.txn([], many)
    assert (await h.store.range_prefix(h.prefix)).kvs == ()


# -- leases ---------------------------------------------------------------------------------


async def test_keys_on_a_revoked_lease_disappear(h: Harness) -> None:
    lease = await h.store.grant_lease(30)
    await h.store.put(h.key("mine"), b"x", lease=lease)
    await h.store.put(h.key("kept"), b"x")
    found = await h.store.get(h.key("mine"))
    assert found is not None
    assert found.lease == lease
    await h.store.revoke_lease(lease)
    assert [kv.key for kv in (await h.store.range_prefix(h.prefix)).kvs] == [h.key("kept")]
    await h.store.revoke_lease(lease)  # already gone: no-op


async def test_keep_alive_reports_ttl_until_the_lease_is_gone(h: Harness) -> None:
    lease = await h.store.grant_lease(30)
    assert await h.store.keep_alive_once(lease) == 30
    await h.store.revoke_lease(lease)
    with pytest.raises(LeaseExpiredError):
        await h.store.keep_alive_once(lease)
    with pytest.raises(LeaseExpiredError):
        await h.store.put(h.key("k"), b"x", lease=lease)


async def test_lease_expiry_deletes_its_keys_and_watchers_see_it(h: Harness) -> None:
    lease = await h.store.grant_lease(1)  # etcd raises this to its minimum TTL (~2 s)
    revision = await h.store.put(h.key("session"), b"x", lease=lease)
    async with h.store.watch_prefix(h.prefix, start_revision=revision + 1) as watch:
        expiry = asyncio.ensure_future(next_event(watch))
        if h.clock is not None:
            await h.let_time_pass(1.5)
        event = await expiry
    assert event.kind is EventKind.DELETE
    assert event.key == h.key("session")
    assert await h.store.get(h.key("session")) is None


async def test_lease_keeper_keeps_a_lease_alive_past_its_ttl(h: Harness) -> None:
    lease = await h.store.grant_lease(2)
    await h.store.put(h.key("broker"), b"x", lease=lease)
    keeper = LeaseKeeper(h.store, lease, 2, clock=h.clock or SystemClock())
    async with keeper:
        await h.let_time_pass(3.5)
        assert not keeper.lost
        assert await h.store.get(h.key("broker")) is not None
    await keeper.stop(revoke=True)
    assert await h.store.get(h.key("broker")) is None


async def test_a_put_without_lease_detaches_the_key_from_its_lease(h: Harness) -> None:
    lease = await h.store.grant_lease(30)
    await h.store.put(h.key("k"), b"leased", lease=lease)
    await h.store.put(h.key("k"), b"free")
    await h.store.revoke_lease(lease)
    found = await h.store.get(h.key("k"))
    assert found is not None
    assert (found.value, found.lease) == (b"free", 0)


# -- watches --------------------------------------------------------------------------------


async def test_watch_replays_past_events_then_follows_live_ones(h: Harness) -> None:
    start = await h.store.put(h.key("a"), b"1")
    await h.store.put(h.key("b"), b"2")
    await h.store.delete(h.key("a"))
    async with h.store.watch_prefix(h.prefix, start_revision=start) as watch:
        past = await events(watch, 3)
        await h.store.put(h.key("c"), b"3")
        await h.store.put(h.key("b"), b"4")
        live = await events(watch, 2)
    got = [(e.kind, e.key, e.value) for e in past + live]
    assert got == [
        (EventKind.PUT, h.key("a"), b"1"),
        (EventKind.PUT, h.key("b"), b"2"),
        (EventKind.DELETE, h.key("a"), b""),
        (EventKind.PUT, h.key("c"), b"3"),
        (EventKind.PUT, h.key("b"), b"4"),
    ]
    revisions = [e.mod_revision for e in past + live]
    assert revisions[0] == start
    assert revisions == sorted(set(revisions))


async def test_watch_without_start_sees_only_later_changes_under_its_prefix(h: Harness) -> None:
    await h.store.put(h.key("w/before"), b"x")
    async with h.store.watch_prefix(h.key("w/")) as watch:
        await h.store.put(h.key("other"), b"x")
        await h.store.put(h.key("w/1"), b"x")
        await h.store.put(h.key("w/2"), b"x")
        await h.store.delete_prefix(h.key("w/"))
        got = [(e.kind, e.key) for e in await events(watch, 5)]
    assert got == [
        (EventKind.PUT, h.key("w/1")),
        (EventKind.PUT, h.key("w/2")),
        (EventKind.DELETE, h.key("w/1")),
        (EventKind.DELETE, h.key("w/2")),
        (EventKind.DELETE, h.key("w/before")),
    ]


async def test_watch_from_a_compacted_revision_raises(h: Harness) -> None:
    old = await h.store.put(h.key("k"), b"1")
    await h.store.put(h.key("k"), b"2")
    current = await h.store.put(h.key("k"), b"3")
    await h.store.compact(current)
    with pytest.raises(RevisionCompactedError):
        async with h.store.watch_prefix(h.prefix, start_revision=old) as watch:
            await next_event(watch)
    async with h.store.watch_prefix(h.prefix, start_revision=current + 1) as watch:
        await h.store.put(h.key("k"), b"4")
        assert (await next_event(watch)).value == b"4"


async def test_aclose_ends_an_iterator_blocked_in_another_task(h: Harness) -> None:
    watch = h.store.watch_prefix(h.prefix)
    await watch.open()
    received: list[WatchEvent] = []
    first = asyncio.Event()

    async def consume() -> None:
        async for event in watch:
            received.append(event)
            first.set()

    consumer = asyncio.ensure_future(consume())
    await h.store.put(h.key("a"), b"1")
    await asyncio.wait_for(first.wait(), WAIT_S)  # the consumer is now blocked on the next one
    await watch.aclose()
    await asyncio.wait_for(consumer, WAIT_S)
    await h.store.put(h.key("b"), b"2")
    assert [e.key for e in received] == [h.key("a")]
    with pytest.raises(StopAsyncIteration):
        await anext(watch)


async def test_closing_the_store_ends_open_watches_with_an_error(h: Harness) -> None:
    watch = h.store.watch_prefix(h.prefix)
    await watch.open()
    await h.store.aclose()
    with pytest.raises(MetadataStoreError):
        await next_event(watch)
    await watch.aclose()
    with pytest.raises(MetadataStoreError):
        await h.store.get(h.key("x"))
