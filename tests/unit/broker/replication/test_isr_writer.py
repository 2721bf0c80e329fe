"""AlterPartition by compare-and-swap: applies only to the state the leader saw; ``IsrWriter``
writes a broker's proposals in batches, each failing alone."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import PartitionState
from yak.metadata.store import Compare, Op, PutOp, TxnResult
from yak_broker.replication.isr_writer import IsrWriter, alter_isr
from yak_broker.replication.state.messages import AlterIsr

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
    return await alter_isr(store, KEYS, AlterIsr(**args))  # type: ignore[arg-type]


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


class _CountingStore(MemoryMetadataStore):
    """Counts transactions; ``before_write`` runs before the first writing one (a concurrent
    writer sneaking in between the batch's read and its write)."""

    def __init__(self) -> None:
        super().__init__()
        self.txns = 0
        self.before_write: Callable[[], Awaitable[None]] | None = None

    async def txn(
        self, compares: Sequence[Compare], on_success: Sequence[Op], on_failure: Sequence[Op] = ()
    ) -> TxnResult:
        self.txns += 1
        hook, self.before_write = self.before_write, None
        if hook is not None and any(isinstance(op, PutOp) for op in on_success):
            await hook()
        else:
            self.before_write = hook
        return await super().txn(compares, on_success, on_failure)


async def _seed_many(store: MemoryMetadataStore, count: int) -> None:
    for p in range(count):
        state = PartitionState(
            topic="t",
            partition=p,
            leader=1,
            leader_epoch=3,
            partition_epoch=7,
            replicas=(1, 2, 3),
            isr=(1, 2, 3),
        )
        await store.put(KEYS.partition("t", p), state.encode())


def _shrink(partition: int, **changes: object) -> AlterIsr:
    return AlterIsr("t", partition, 1, 3, 7, (1, 2))._replace(**changes)  # type: ignore[arg-type]


async def _isr_of(store: MemoryMetadataStore, partition: int) -> tuple[tuple[int, ...], int]:
    kv = await store.get(KEYS.partition("t", partition))
    assert kv is not None
    state = PartitionState.decode(kv.value)
    return state.isr, state.partition_epoch


async def test_proposals_made_together_are_written_in_one_batch() -> None:
    store = _CountingStore()
    await _seed_many(store, 30)
    writer = IsrWriter(lambda: store, KEYS)
    store.txns = 0
    results = await asyncio.gather(*(writer.write(_shrink(p)) for p in range(30)))
    assert store.txns == 2  # one read, one write, for 30 partitions
    assert writer.batches == 1
    for p, state in enumerate(results):
        assert state is not None
        assert (state.isr, state.partition_epoch) == ((1, 2), 8)
        assert await _isr_of(store, p) == ((1, 2), 8)
    await writer.close()
    await store.aclose()


async def test_a_stale_or_invalid_proposal_fails_alone_in_its_batch() -> None:
    store = _CountingStore()
    await _seed_many(store, 4)
    writer = IsrWriter(lambda: store, KEYS)
    results = await asyncio.gather(
        writer.write(_shrink(0)),
        writer.write(_shrink(1, expected_partition_epoch=6)),  # the partition moved on
        writer.write(_shrink(2, new_isr=(2, 3))),  # without the leader: refused
        writer.write(_shrink(3)),
    )
    assert [r is not None for r in results] == [True, False, False, True]
    assert await _isr_of(store, 1) == ((1, 2, 3), 7)
    assert await _isr_of(store, 2) == ((1, 2, 3), 7)
    assert writer.batches == 1
    await writer.close()
    await store.aclose()


async def test_a_conflicting_write_fails_only_its_partition() -> None:
    store = _CountingStore()
    await _seed_many(store, 5)

    async def controller_drops_broker_3_from_partition_2() -> None:
        kv = await store.get(KEYS.partition("t", 2))
        assert kv is not None
        state = PartitionState.decode(kv.value)
        moved = state.model_copy(update={"isr": (1, 2), "partition_epoch": 8})
        await store.put(KEYS.partition("t", 2), moved.encode())

    store.before_write = controller_drops_broker_3_from_partition_2
    writer = IsrWriter(lambda: store, KEYS)
    results = await asyncio.gather(*(writer.write(_shrink(p, new_isr=(1, 3))) for p in range(5)))
    assert [r is not None for r in results] == [True, True, False, True, True]
    assert await _isr_of(store, 2) == ((1, 2), 8)  # the controller's write stands
    assert await _isr_of(store, 4) == ((1, 3), 8)
    await writer.close()
    await store.aclose()


async def test_many_proposals_and_repeats_go_in_several_batches() -> None:
    store = _CountingStore()
    await _seed_many(store, 150)
    writer = IsrWriter(lambda: store, KEYS, max_batch=64)
    first = [writer.write(_shrink(p)) for p in range(150)]
    # A second proposal for partition 0 (a newer machine's) may not share a transaction.
    again = writer.write(_shrink(0, expected_partition_epoch=8, new_isr=(1,)))
    results = await asyncio.gather(*first, again)
    assert all(r is not None for r in results)
    assert writer.batches == 3
    assert await _isr_of(store, 0) == ((1,), 9)
    assert await _isr_of(store, 149) == ((1, 2), 8)
    await writer.close()
    await store.aclose()


async def test_closing_answers_what_is_still_queued() -> None:
    store = _CountingStore()
    await _seed_many(store, 1)
    writer = IsrWriter(lambda: store, KEYS)
    pending = asyncio.ensure_future(writer.write(_shrink(0)))
    await asyncio.sleep(0)  # queued; its batch not written yet
    await writer.close()
    assert await pending is None
    assert await writer.write(_shrink(0)) is None  # closed: nothing is written any more
    assert await _isr_of(store, 0) == ((1, 2, 3), 7)
    await store.aclose()


async def test_a_change_retried_alone_keeps_its_data_folder_ids() -> None:
    """The batch's write conflicts (another writer changed partition 1): partition 0's change is
    retried alone and still records the folder of the follower it adds."""
    store = _CountingStore()
    await _seed_many(store, 2)
    for p in range(2):
        kv = await store.get(KEYS.partition("t", p))
        assert kv is not None
        narrowed = PartitionState.decode(kv.value).model_copy(update={"isr": (1, 2)})
        await store.put(KEYS.partition("t", p), narrowed.encode())

    async def someone_writes_partition_1() -> None:
        kv = await store.get(KEYS.partition("t", 1))
        assert kv is not None
        await store.put(KEYS.partition("t", 1), kv.value)  # same content, new mod revision

    store.before_write = someone_writes_partition_1
    writer = IsrWriter(lambda: store, KEYS)
    expand = _shrink(0, new_isr=(1, 2, 3), log_dirs=((3, "dir-of-3"),))
    results = await asyncio.gather(writer.write(expand), writer.write(_shrink(1, new_isr=(1,))))
    assert [r is not None for r in results] == [True, True]
    assert results[0] is not None
    assert results[0].isr_log_dirs == {3: "dir-of-3"}
    await writer.close()
    await store.aclose()


REGISTRATION = KEYS.broker(1)


async def test_a_fenced_process_changes_no_isr() -> None:
    """The registration no longer holds what this process wrote (a newer process of the id, or
    a new data folder announced): its proposals fail, in the batch and not retried alone."""
    store = _CountingStore()
    await _seed_many(store, 3)
    await store.put(REGISTRATION, b"process-a")
    writer = IsrWriter(lambda: store, KEYS, fence=lambda: Compare.value(REGISTRATION, b"process-a"))
    assert await writer.write(_shrink(0)) is not None  # still ours: written
    await store.put(REGISTRATION, b"process-b")
    store.txns = 0
    results = await asyncio.gather(writer.write(_shrink(1)), writer.write(_shrink(2)))
    assert list(results) == [None, None]
    assert store.txns == 2  # the read and the fenced write: nothing retried partition by partition
    assert await _isr_of(store, 1) == ((1, 2, 3), 7)
    assert await _isr_of(store, 2) == ((1, 2, 3), 7)
    await writer.close()
    await store.aclose()


async def test_an_unregistered_process_writes_nothing() -> None:
    store = _CountingStore()
    await _seed_many(store, 1)
    writer = IsrWriter(lambda: store, KEYS, fence=lambda: None)
    store.txns = 0
    assert await writer.write(_shrink(0)) is None
    assert store.txns == 0
    assert await _isr_of(store, 0) == ((1, 2, 3), 7)
    await writer.close()
    await store.aclose()


async def test_a_fenced_single_change_fails() -> None:
    store = MemoryMetadataStore()
    await _seed(store)
    await store.put(REGISTRATION, b"process-b")
    fence = Compare.value(REGISTRATION, b"process-a")
    assert await alter_isr(store, KEYS, _shrink(0), fence=fence) is None
    assert (await _stored(store)).isr == (1, 2, 3)
    await store.aclose()
