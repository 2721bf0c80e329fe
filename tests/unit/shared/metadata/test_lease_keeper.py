"""LeaseKeeper on the in-memory store and a fake clock: refresh cadence and loss reports."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from yak.clock import FakeClock
from yak.errors import MetadataStoreError
from yak.metadata.lease_keeper import LeaseKeeper
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.store import LeaseExpiredError

WAIT_S = 5.0
TTL = 9


class FlakyStore(MemoryMetadataStore):
    """A memory store whose keep-alives fail while ``unreachable`` is set, and never answer
    (until cancelled) while ``hanging`` is."""

    unreachable = False
    hanging = False
    keep_alives = 0
    abandoned = 0

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.answer = asyncio.Event()  # releases the hanging calls

    async def keep_alive_once(self, lease_id: int) -> int:
        self.keep_alives += 1
        if self.unreachable:
            raise MetadataStoreError("etcd unreachable (simulated)")
        if self.hanging:
            try:
                await self.answer.wait()
            except asyncio.CancelledError:
                self.abandoned += 1
                raise
        return await super().keep_alive_once(lease_id)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store(clock: FakeClock) -> AsyncIterator[FlakyStore]:
    store = FlakyStore(clock)
    try:
        yield store
    finally:
        await store.aclose()


async def tick(clock: FakeClock, seconds: float) -> None:
    """Advance the clock and let every task it woke run to its next wait."""
    clock.advance(seconds)
    for _ in range(10):
        await asyncio.sleep(0)


async def test_refreshes_every_third_of_the_ttl(store: FlakyStore, clock: FakeClock) -> None:
    lease = await store.grant_lease(TTL)
    await store.put(b"k", b"v", lease=lease)
    async with LeaseKeeper(store, lease, TTL, clock=clock) as keeper:
        for _ in range(12):  # four TTLs
            await tick(clock, TTL / 3)
        assert store.keep_alives == 12
        assert not keeper.lost
        assert await store.get(b"k") is not None


async def test_reports_a_lease_revoked_behind_its_back(store: FlakyStore, clock: FakeClock) -> None:
    lost: list[LeaseExpiredError] = []
    lease = await store.grant_lease(TTL)
    async with LeaseKeeper(store, lease, TTL, clock=clock, on_lost=lost.append) as keeper:
        await store.revoke_lease(lease)
        await tick(clock, TTL / 3)
        error = await asyncio.wait_for(keeper.wait_lost(), WAIT_S)
    assert keeper.lost
    assert keeper.error is error
    assert lost == [error]
    assert isinstance(error, LeaseExpiredError)


async def test_tolerates_failures_shorter_than_the_ttl(store: FlakyStore, clock: FakeClock) -> None:
    lease = await store.grant_lease(TTL)
    async with LeaseKeeper(store, lease, TTL, clock=clock) as keeper:
        store.unreachable = True
        await tick(clock, TTL / 3)
        store.unreachable = False
        await tick(clock, TTL / 3)
        assert store.keep_alives == 2
        assert not keeper.lost
        assert await store.keep_alive_once(lease) == TTL


async def test_presumes_the_lease_lost_after_a_ttl_without_refresh(
    store: FlakyStore, clock: FakeClock
) -> None:
    lease = await store.grant_lease(TTL)
    async with LeaseKeeper(store, lease, TTL, clock=clock) as keeper:
        store.unreachable = True
        for _ in range(3):
            await tick(clock, TTL / 3)
        error = await asyncio.wait_for(keeper.wait_lost(), WAIT_S)
    assert "not refreshed" in error.message


async def test_stop_with_revoke_deletes_the_leased_keys(
    store: FlakyStore, clock: FakeClock
) -> None:
    lease = await store.grant_lease(TTL)
    await store.put(b"k", b"v", lease=lease)
    keeper = LeaseKeeper(store, lease, TTL, clock=clock)
    keeper.start()
    await keeper.stop(revoke=True)
    assert await store.get(b"k") is None


async def test_a_keep_alive_that_never_answers_is_abandoned_when_the_ttl_runs_out(
    store: FlakyStore, clock: FakeClock
) -> None:
    """A store call that hangs (the gRPC stream whose first write never ended, found by the
    chaos suite) must not hang the keeper: at the TTL since the last renewal the holder is
    told its lease is gone, as etcd will have expired it."""
    lost: list[LeaseExpiredError] = []
    lease = await store.grant_lease(TTL)
    async with LeaseKeeper(store, lease, TTL, clock=clock, on_lost=lost.append) as keeper:
        await tick(clock, TTL / 3)  # one renewal answered, at t = 3
        store.hanging = True
        await tick(clock, TTL / 3)  # the next one, sent at t = 6, hangs
        await tick(clock, TTL - TTL / 3 - 0.1)
        assert not keeper.lost  # the TTL since the renewal at t = 3 has not run out yet
        await tick(clock, 0.1)
        error = await asyncio.wait_for(keeper.wait_lost(), WAIT_S)
    assert lost == [error]
    assert "did not answer" in error.message
    assert store.keep_alives == 2  # the hung call was not followed by more
    assert store.abandoned == 1  # and it was cancelled, not left running


async def test_a_slow_keep_alive_answered_within_the_ttl_keeps_the_lease(
    store: FlakyStore, clock: FakeClock
) -> None:
    lease = await store.grant_lease(TTL)
    async with LeaseKeeper(store, lease, TTL, clock=clock) as keeper:
        store.hanging = True
        await tick(clock, TTL / 3)  # the first renewal, sent at t = 3, hangs...
        await tick(clock, TTL / 3)
        assert store.keep_alives == 1  # no second one is sent while it is out
        store.answer.set()  # ...and answers at t = 6, before the TTL ran out
        await tick(clock, 0)
        store.hanging = False
        for _ in range(6):
            await tick(clock, TTL / 3)
        assert not keeper.lost
        assert store.abandoned == 0
        assert store.keep_alives == 8  # the late one, the one due at t = 6, then one per tick
        assert await store.keep_alive_once(lease) == TTL
