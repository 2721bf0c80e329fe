"""The deletion sweep: which keys a broker tombstones, one sweep per group at a time, retries
after a failing store, tombstones through the committer."""

from __future__ import annotations

import asyncio

from yak.clock import FakeClock
from yak.errors import LeaderNotAvailableError
from yak_broker.share.snapshot_committer import SnapshotCommitter
from yak_broker.share.state_store import MemoryShareStateStore, SharePartitionKey
from yak_broker.share.state_sweep import StateSweeper, stale_keys

OLD = SharePartitionKey("jobs", "orders", 0, incarnation=1)
OLD_ELSEWHERE = SharePartitionKey("jobs", "orders", 1, incarnation=1)
LIVE = SharePartitionKey("jobs", "orders", 0, incarnation=2)


def led_here(key: SharePartitionKey) -> bool:
    return key.partition == 0


def test_stale_keys_are_other_incarnations_of_partitions_led_here() -> None:
    keys = [OLD, OLD_ELSEWHERE, LIVE]
    assert stale_keys(keys, 2, led_here) == [OLD]
    assert stale_keys(keys, None, led_here) == [OLD, LIVE]  # gone or deleting: every one
    assert stale_keys(keys, None, lambda _k: False) == []


class FlakyStore(MemoryShareStateStore):
    """Its ``keys`` fails ``failures`` times; each call is counted and sets ``called``; calls
    wait for ``release``."""

    def __init__(self, failures: int = 0) -> None:
        super().__init__()
        self.failures = failures
        self.calls = 0
        self.called = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()

    async def keys(self, group: str) -> list[SharePartitionKey]:
        self.calls += 1
        self.called.set()
        await self.release.wait()
        if self.failures:
            self.failures -= 1
            raise LeaderNotAvailableError("state partition without leader")
        return await super().keys(group)


def sweeper_on(store: FlakyStore, live: int | None, clock: FakeClock) -> StateSweeper:
    return StateSweeper(
        store,
        SnapshotCommitter(store),
        live_incarnation=lambda _g: live,
        leads=led_here,
        clock=clock,
        attempts=3,
        retry_s=1.0,
    )


async def test_a_sweep_tombstones_the_stale_keys_led_here_and_keeps_the_rest() -> None:
    store = FlakyStore()
    await store.save({OLD: b"o", OLD_ELSEWHERE: b"e", LIVE: b"l"})
    sweeper = sweeper_on(store, 2, FakeClock())
    sweeper.sweep("jobs")
    await sweeper.idle()
    assert set(store.snapshots) == {OLD_ELSEWHERE, LIVE}
    assert sweeper.tombstones == 1


async def test_requests_during_a_sweep_run_it_once_more_after() -> None:
    store = FlakyStore()
    store.release.clear()
    sweeper = sweeper_on(store, None, FakeClock())
    sweeper.sweep("jobs")
    await asyncio.sleep(0)
    for _ in range(5):
        sweeper.sweep("jobs")
    store.release.set()
    await sweeper.idle()
    assert store.calls == 2


async def failed_then_retried(store: FlakyStore, clock: FakeClock) -> None:
    """Wait for a call (it fails and parks in the retry's sleep, in the same step), then let
    the retry's time pass."""
    await store.called.wait()
    store.called.clear()
    clock.advance(1.0)


async def test_a_failing_store_is_retried_a_bounded_number_of_times() -> None:
    store = FlakyStore(failures=1)
    await store.save({OLD: b"o"})
    clock = FakeClock()
    sweeper = sweeper_on(store, None, clock)
    sweeper.sweep("jobs")
    await failed_then_retried(store, clock)
    await sweeper.idle()
    assert store.snapshots == {}
    store.failures = 5
    await store.save({OLD: b"o"})
    store.called.clear()
    sweeper.sweep("jobs")
    for _ in range(2):  # two failed attempts a retry_s apart, then the last one fails
        await failed_then_retried(store, clock)
    await sweeper.idle()
    assert store.calls == 5  # 2 for the first sweep, 3 (the limit) for the second
    assert OLD in store.snapshots  # given up; the next change of the group sweeps again


async def test_close_stops_a_sweep_and_later_requests_do_nothing() -> None:
    store = FlakyStore()
    store.release.clear()
    sweeper = sweeper_on(store, None, FakeClock())
    sweeper.sweep("jobs")
    await asyncio.sleep(0)
    await sweeper.close()
    sweeper.sweep("jobs")
    await sweeper.idle()
    assert store.calls == 1
