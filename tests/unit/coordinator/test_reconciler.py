"""The reconcile driver: its writes (compare-and-swap per key and the controller fence) and
its loop (a round decides what changed)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from types import MappingProxyType
from typing import cast

import pytest

from yak.clock import FakeClock
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace, ParsedKey
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerLoad, BrokerRegistration, PartitionState, TopicRecord
from yak.metadata.snapshot import ClusterSnapshot
from yak.metadata.store import Compare
from yak_coordinator.decisions.partition_plan import (
    STEP_PARTITIONS,
    CreatePartitions,
    DeleteTopic,
    UpdatePartition,
    reconcile,
)
from yak_coordinator.election import Term
from yak_coordinator.reconciler import Reconciler

KS = Keyspace("drv")


def state(leader: int, epoch: int = 0) -> PartitionState:
    return PartitionState(
        topic="t",
        partition=0,
        leader=leader,
        leader_epoch=epoch,
        partition_epoch=epoch,
        replicas=(1, 2),
        isr=(1, 2),
    )


@pytest.fixture
async def setup() -> AsyncIterator[tuple[MemoryMetadataStore, Reconciler, Term]]:
    store = MemoryMetadataStore(FakeClock())
    revision = await store.put(KS.controller, b"{}")
    term = Term(epoch=revision, lease_id=0, fence=Compare.create_revision(KS.controller, revision))
    cache = MetadataCache(store, KS)
    yield store, Reconciler(store, KS, cache), term
    await store.aclose()


async def stored(store: MemoryMetadataStore) -> PartitionState | None:
    kv = await store.get(KS.partition("t", 0))
    return None if kv is None else PartitionState.decode(kv.value)


async def test_create_then_update_with_cas(setup) -> None:
    store, reconciler, term = setup
    assert await reconciler.apply([CreatePartitions("t", (state(1),))], term) > 0
    assert await stored(store) == state(1)
    # Creating again is a no-op: the key must be absent.
    assert await reconciler.apply([CreatePartitions("t", (state(2),))], term) == 0
    assert await stored(store) == state(1)

    assert await reconciler.apply([UpdatePartition(state(1), state(2, 1), "test")], term) > 0
    assert await stored(store) == state(2, 1)
    # A decision based on a stale state writes nothing.
    assert await reconciler.apply([UpdatePartition(state(1), state(1, 9), "stale")], term) == 0
    assert await stored(store) == state(2, 1)
    assert not term.ended


async def test_deposed_controller_writes_nothing_and_its_term_ends(setup) -> None:
    store, reconciler, term = setup
    await store.delete(KS.controller)
    await store.put(KS.controller, b"{}")  # another coordinator's election: a new create revision
    assert await reconciler.apply([CreatePartitions("t", (state(1),))], term) == 0
    assert await stored(store) is None
    assert term.ended


async def test_delete_topic_removes_record_and_partitions(setup) -> None:
    store, reconciler, term = setup
    await store.put(KS.topic("t"), b"{}")
    await reconciler.apply([CreatePartitions("t", (state(1),))], term)
    await store.put(KS.partition("tt", 0), b"{}")  # another topic sharing the name prefix
    assert await reconciler.apply([DeleteTopic("t")], term) > 0
    assert await store.get(KS.topic("t")) is None
    assert await stored(store) is None
    assert await store.get(KS.partition("tt", 0)) is not None


# -- the loop: a round decides what changed ------------------------------------------------------


def registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=broker_id, host="127.0.0.1", port=9000 + broker_id, started_at_ms=1
    )


def record(name: str, partitions: int = 4) -> TopicRecord:
    return TopicRecord(
        name=name,
        topic_id=f"id-{name}",
        partitions=partitions,
        replication_factor=2,
        created_at_ms=1,
    )


Running = tuple[MemoryMetadataStore, MetadataCache, Reconciler]


async def _settled(
    store: MemoryMetadataStore, cache: MetadataCache, reconciler: Reconciler
) -> None:
    """Until the reconciler waits with every change decided, the cache at the store's revision."""
    for _ in range(10_000):
        if reconciler.idle and cache.revision == store.revision:
            return
        await asyncio.sleep(0)  # the in-memory store and the cache make progress in this loop
    raise AssertionError("the reconciler did not settle")


async def _running(resync_interval_s: float) -> AsyncIterator[Running]:
    store = MemoryMetadataStore(FakeClock())
    revision = await store.put(KS.controller, b"{}")
    term = Term(epoch=revision, lease_id=0, fence=Compare.create_revision(KS.controller, revision))
    for broker_id in (1, 2):
        await store.put(KS.broker(broker_id), registration(broker_id).encode())
    for name in ("a", "b"):
        await store.put(KS.topic(name), record(name).encode())
    cache = MetadataCache(store, KS)
    await cache.start()
    reconciler = Reconciler(store, KS, cache, resync_interval_s=resync_interval_s)
    task = asyncio.get_running_loop().create_task(reconciler.run(term))
    try:
        await _settled(store, cache, reconciler)
        yield store, cache, reconciler
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await cache.stop()
        await store.aclose()


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    async for setup in _running(resync_interval_s=3600):
        yield setup


async def test_a_change_to_one_topic_decides_that_topic_only(running: Running) -> None:
    store, cache, reconciler = running
    assert len(cache.snapshot.partitions) == 8  # both topics created by the first rounds
    rounds, decided = reconciler.rounds, reconciler.partitions_decided
    before = cache.snapshot.partitions[("a", 0)]
    shrunk = before.model_copy(update={"isr": before.isr[:1], "partition_epoch": 1})
    await store.put(KS.partition("a", 0), shrunk.encode())  # the leader's AlterPartition
    await _settled(store, cache, reconciler)
    assert reconciler.rounds > rounds
    assert reconciler.partitions_decided - decided == 4 * (reconciler.rounds - rounds)
    assert cache.snapshot.partitions[("a", 0)] == shrunk  # nothing to do about it


async def test_a_broker_change_decides_every_topic(running: Running) -> None:
    store, cache, reconciler = running
    led = {tp for tp, s in cache.snapshot.partitions.items() if s.leader == 2}
    assert led
    decided = reconciler.partitions_decided
    await store.delete(KS.broker(2))
    await _settled(store, cache, reconciler)
    assert reconciler.partitions_decided - decided >= 8
    for tp, state in cache.snapshot.partitions.items():
        assert state.leader == 1, tp
        assert state.isr == (1,), tp
        assert state.leader_epoch == int(tp in led)


async def test_a_load_sample_alone_decides_nothing(running: Running) -> None:
    store, cache, reconciler = running
    rounds = reconciler.rounds
    for n in range(5):  # the broker republishes its load every few seconds
        sample = BrokerLoad(
            cpu=0.1 * n,
            memory_bytes=n,
            disk_used_ratio=0.5,
            records_per_second=100.0 * n,
            sampled_at_ms=n,
            publish_interval_ms=5_000,
        )
        loaded = registration(2).model_copy(update={"load": sample})
        await store.put(KS.broker(2), loaded.encode())
        await _settled(store, cache, reconciler)
    assert cache.snapshot.brokers[2].load is not None
    assert reconciler.rounds == rounds
    await store.put(KS.broker(2), registration(2).model_copy(update={"port": 9999}).encode())
    await _settled(store, cache, reconciler)
    assert reconciler.rounds > rounds  # an address change still decides everything


async def test_nothing_changing_runs_no_round(running: Running) -> None:
    store, cache, reconciler = running
    rounds = reconciler.rounds
    for _ in range(100):
        await asyncio.sleep(0)
    await store.put(KS.committed_offset("g", "a", 0), b'{"offset": 1}')  # not metadata
    await _settled(store, cache, reconciler)
    assert reconciler.rounds == rounds


async def test_the_resync_interval_decides_everything_again() -> None:
    async for _store, _cache, reconciler in _running(resync_interval_s=0.001):
        decided = reconciler.partitions_decided
        await asyncio.sleep(0.05)  # a few resync intervals of real time: nothing else runs them
        assert reconciler.partitions_decided - decided >= 8
        assert reconciler.partitions_decided % 8 == 0  # full passes only


class StaleCache:
    """A cache that shows an older state than the store holds, and records what the
    reconciler waits for."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self.listeners: list[Callable[[ParsedKey | None], None]] = []
        self.waits: list[Callable[[ClusterSnapshot], bool]] = []
        self.waiting = asyncio.Event()

    def subscribe(self, listener: Callable[[ParsedKey | None], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: None

    async def wait_for(
        self, predicate: Callable[[ClusterSnapshot], bool], timeout_s: float
    ) -> ClusterSnapshot:
        self.waits.append(predicate)
        self.waiting.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_after_a_stale_decision_it_waits_for_the_state_it_read(setup) -> None:
    store, _, term = setup
    await store.put(KS.partition("t", 0), state(2, 1).encode())  # already moved to broker 2
    stale = ClusterSnapshot(
        revision=store.revision - 1,  # before that write: broker 1 dead, leader 1
        brokers={2: registration(2)},
        topics={"t": record("t", 1)},
        partitions={("t", 0): state(1)},
    )
    cache = StaleCache(stale)
    reconciler = Reconciler(store, KS, cast(MetadataCache, cache))
    task = asyncio.get_running_loop().create_task(reconciler.run(term))
    try:
        await cache.waiting.wait()
        assert await stored(store) == state(2, 1)  # the stale decision wrote nothing
        (due,) = cache.waits
        cache.listeners[0](KS.parse(KS.partition("t", 0)))  # its change is on the way...
        assert not due(stale)  # ...but deciding before the cache has it would decide the same
        caught_up = dataclasses.replace(stale, revision=store.revision)
        assert due(caught_up)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_full_pass_gives_the_loop_turns_and_decides_what_reconcile_does(setup) -> None:
    """A full pass over many partitions decides in steps, with a turn for the loop between
    them (one piece held the coordinator's loop ~70 ms at 20,000 partitions), and decides
    exactly what ``reconcile`` does on the same snapshot."""
    _store, reconciler, _term = setup
    names = [f"t{i:02d}" for i in range(12)]
    snapshot = ClusterSnapshot(
        revision=7,
        brokers=MappingProxyType({b: registration(b) for b in (1, 2, 3)}),
        topics=MappingProxyType({n: record(n, partitions=STEP_PARTITIONS // 4) for n in names}),
    )
    turns = 0

    async def elsewhere() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    other = asyncio.get_running_loop().create_task(elsewhere())
    await asyncio.sleep(0)
    try:
        before = turns
        actions = await reconciler.decide(snapshot, None)
        during = turns - before
    finally:
        other.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await other
    assert actions == reconcile(snapshot)
    assert len(actions) == 12
    assert all(isinstance(a, CreatePartitions) for a in actions)
    assert during >= 3  # 12 topics of a quarter step each: three steps, then the last
