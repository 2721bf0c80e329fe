"""Group commit of share snapshots: saves while one is in flight share the next save; a
failed save fails every commit it carried."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tests.unit.broker.share.share_support import GatedStore
from yak.errors import NotEnoughReplicasError
from yak_broker.share.snapshot_committer import SnapshotCommitter
from yak_broker.share.state_store import MemoryShareStateStore, SharePartitionKey

A = SharePartitionKey("g", "t", 0)
B = SharePartitionKey("g", "t", 1)


async def test_commits_arriving_during_a_save_share_the_next_one() -> None:
    store = GatedStore()
    store.gate.clear()
    committer = SnapshotCommitter(store)
    first = asyncio.create_task(committer.commit(A, b"a1"))
    await asyncio.sleep(0)  # the flusher starts the first save
    others = [
        asyncio.create_task(committer.commit(A, b"a2")),
        asyncio.create_task(committer.commit(B, b"b1")),
    ]
    await asyncio.sleep(0)
    store.gate.set()
    await asyncio.gather(first, *others)
    assert store.batches == [{A: b"a1"}, {A: b"a2", B: b"b1"}]
    assert store.snapshots == {A: b"a2", B: b"b1"}
    assert committer.saves == 2


async def test_a_tombstone_lands_after_a_snapshot_of_its_key_already_in_flight() -> None:
    store = GatedStore()
    store.gate.clear()
    committer = SnapshotCommitter(store)
    saving = asyncio.create_task(committer.commit(A, b"a1"))
    await asyncio.sleep(0)  # the save carrying a1 is in flight
    deleting = asyncio.create_task(committer.commit(A, None))
    await asyncio.sleep(0)
    store.gate.set()
    await asyncio.gather(saving, deleting)
    assert store.batches == [{A: b"a1"}, {A: None}]
    assert store.snapshots == {}


async def test_a_failed_save_fails_its_commits_and_the_next_save_runs() -> None:
    store = MemoryShareStateStore()
    store.fail_next = NotEnoughReplicasError("no quorum")
    committer = SnapshotCommitter(store)
    results = await asyncio.gather(
        committer.commit(A, b"a1"), committer.commit(B, b"b1"), return_exceptions=True
    )
    assert all(isinstance(r, NotEnoughReplicasError) for r in results)
    assert store.snapshots == {}
    await committer.commit(A, b"a2")
    assert store.snapshots == {A: b"a2"}


async def test_close_cancels_commits_in_flight() -> None:
    store = GatedStore()
    store.gate.clear()
    committer = SnapshotCommitter(store)
    pending = asyncio.create_task(committer.commit(A, b"a1"))
    await asyncio.sleep(0)
    await committer.close()
    with pytest.raises(asyncio.CancelledError):
        await pending


async def test_a_failed_save_fails_the_snapshots_of_its_keys_queued_behind_it() -> None:
    store = GatedStore()
    store.gate.clear()
    committer = SnapshotCommitter(store)
    a1 = committer.submit(A, b"a1")
    await store.saving.wait()  # a1's save is in flight
    a2 = committer.submit(A, b"a2")  # stands on a1
    b1 = committer.submit(B, b"b1")
    store.fail_next = NotEnoughReplicasError("no quorum")
    store.gate.set()
    results = await asyncio.gather(a1, a2, b1, return_exceptions=True)
    failed = NotEnoughReplicasError
    assert [type(r) for r in results] == [failed, failed, type(None)]
    assert store.batches == [{A: b"a1"}, {B: b"b1"}]  # a2 was never saved
    assert store.snapshots == {B: b"b1"}


async def test_a_newer_snapshot_queued_for_a_key_replaces_the_older_and_shares_its_future() -> None:
    store = GatedStore()
    store.gate.clear()
    committer = SnapshotCommitter(store)
    committer.submit(B, b"b1")
    await store.saving.wait()
    older, newer = committer.submit(A, b"a1"), committer.submit(A, b"a2")
    assert older is newer
    store.gate.set()
    await newer
    assert store.batches == [{B: b"b1"}, {A: b"a2"}]


async def test_lanes_save_independently_and_a_slow_lane_holds_back_only_its_own() -> None:
    store = GatedStore()
    store.lanes = 2
    store.gate.clear()
    committer = SnapshotCommitter(store)
    slow = committer.submit(A, b"a1")  # lane 0: its save waits at the gate
    await store.saving.wait()
    held, store.gate = store.gate, asyncio.Event()
    store.gate.set()  # saves that begin from now on pass
    await committer.submit(B, b"b1")  # lane 1 saves beside lane 0's save in flight
    assert not slow.done()
    assert store.batches == [{A: b"a1"}, {B: b"b1"}]
    assert store.snapshots == {B: b"b1"}
    held.set()
    await slow
    assert store.snapshots == {A: b"a1", B: b"b1"}


async def test_each_save_is_observed_with_its_duration_failed_ones_too() -> None:
    store = MemoryShareStateStore()
    seen: list[float] = []
    committer = SnapshotCommitter(store, seen.append)
    await committer.commit(A, b"a1")
    store.fail_next = NotEnoughReplicasError("not enough")
    with pytest.raises(NotEnoughReplicasError):
        await committer.commit(A, b"a2")
    assert len(seen) == 2
    assert all(0 <= s < 5 for s in seen)


async def test_a_snapshot_handed_in_as_a_function_is_encoded_once_when_its_save_begins() -> None:
    store = GatedStore()
    store.gate.clear()
    committer = SnapshotCommitter(store)
    calls: list[str] = []

    def encoder(value: bytes) -> Callable[[], bytes]:
        def encode() -> bytes:
            calls.append(value.decode())
            return value

        return encode

    first = asyncio.create_task(committer.commit(A, encoder(b"a1")))
    await store.saving.wait()  # the first save began: a1 was encoded
    assert calls == ["a1"]
    queued = [asyncio.create_task(committer.commit(A, encoder(v))) for v in (b"a2", b"a3")]
    await asyncio.sleep(0)
    assert calls == ["a1"]  # waiting for the save in flight: not encoded yet
    store.gate.set()
    await asyncio.gather(first, *queued)
    assert calls == ["a1", "a3"]  # a2 was replaced before its save began: never encoded
    assert store.batches == [{A: b"a1"}, {A: b"a3"}]
