"""The reconcile driver's writes: compare-and-swap per key and the controller fence."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from yak.clock import FakeClock
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import PartitionState
from yak.metadata.store import Compare
from yak_coordinator.election import Term
from yak_coordinator.reconcile import CreatePartitions, DeleteTopic, UpdatePartition
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
