"""AlterPartition by compare-and-swap: applies only to the state the leader saw."""

from __future__ import annotations

from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import PartitionState
from yak_broker.replication.isr_writer import alter_isr

KEYS = Keyspace("c1")


async def _seed(store: MemoryMetadataStore, **changes: object) -> PartitionState:
    state = PartitionState(
        topic="t",
        partition=0,
        leader=1,
        leader_epoch=3,
        partition_epoch=7,
        replicas=(1, 2, 3),
        isr=(1, 2, 3),
    ).model_copy(update=changes)
    await store.put(KEYS.partition("t", 0), state.encode())
    return state


async def _alter(store: MemoryMetadataStore, **overrides: object) -> PartitionState | None:
    args: dict[str, object] = {
        "topic": "t",
        "partition": 0,
        "leader_id": 1,
        "leader_epoch": 3,
        "expected_partition_epoch": 7,
        "new_isr": (1, 2),
    }
    args.update(overrides)
    return await alter_isr(store, KEYS, **args)  # type: ignore[arg-type]


async def _stored(store: MemoryMetadataStore) -> PartitionState:
    kv = await store.get(KEYS.partition("t", 0))
    assert kv is not None
    return PartitionState.decode(kv.value)


async def test_shrink_bumps_partition_epoch_and_keeps_the_rest() -> None:
    store = MemoryMetadataStore()
    await _seed(store)
    changed = await _alter(store)
    assert changed is not None
    assert (changed.isr, changed.partition_epoch, changed.leader_epoch) == ((1, 2), 8, 3)
    assert await _stored(store) == changed
    await store.aclose()


async def test_stale_partition_epoch_or_leader_epoch_changes_nothing() -> None:
    store = MemoryMetadataStore()
    seeded = await _seed(store, partition_epoch=8)
    assert await _alter(store) is None
    assert await _alter(store, expected_partition_epoch=8, leader_epoch=2) is None
    assert await _alter(store, expected_partition_epoch=8, leader_id=2) is None
    assert await _stored(store) == seeded
    await store.aclose()


async def test_missing_partition_is_not_written() -> None:
    store = MemoryMetadataStore()
    assert await _alter(store) is None
    assert await store.get(KEYS.partition("t", 0)) is None
    await store.aclose()
