"""AlterPartition: the leader changes a partition's ISR in etcd with a compare-and-swap.

Only the leader of the current leader epoch changes the ISR, and only from the state it last
saw: the write succeeds if the key still holds the same leader, leader epoch and partition epoch
(so the controller's concurrent change — a new leader, a dead broker dropped — wins, and the
leader retries from the state its watch then delivers). The new state carries
``partition_epoch + 1``; every other field is kept as read (reassignment fields included).

The broker's metadata watch delivers the committed state back to the replica manager, which
hands it to the partition's ``LeaderPartition``; ``alter_isr`` only reports success.

``IsrWriter`` batches the proposals of one broker (Kafka's AlterPartition request carries many
partitions; issue 19): proposals made while a batch is in flight wait for the next one, and a
batch of up to ``max_batch`` partitions costs two etcd round trips — one transaction reading
every key, one writing every still-valid change with a compare on each key's mod revision —
instead of two per partition. When the write's compare fails (another writer changed one of the
keys in between), each change of the batch is retried alone (``alter_isr``), so one conflict
fails only its own partition. A partition proposed twice waits for the next batch (etcd refuses
a key written twice in one transaction). A retried change is the whole proposal, its data
folder ids included.

**Fencing** (Kafka's broker epoch in AlterPartition, KIP-841/KIP-903): every write also
compares this process's registration (``brokers/<id>``) with the bytes the process wrote there
(``fence``). A previous process of the same broker id — paused, or restarted on an empty disk
since — still holds a partition's leader and epochs as it saw them; its proposal would pass the
partition's compare. It fails this one: a newer process re-registered with another incarnation,
or announced a new data folder on the old registration (``registration.announce_log_dir``). A
process that is not registered (its lease lost, registering again) writes no ISR change. When
the fence fails, the batch is not retried partition by partition.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence

from yak.errors import MetadataStoreError
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import PartitionState
from yak.metadata.store import Compare, GetOp, GetResponse, KeyValue, MetadataStore, PutOp
from yak_broker.replication.state.messages import AlterIsr

__all__ = ["IsrWriter", "alter_isr", "alter_isr_batch", "altered_state"]

_log = logging.getLogger(__name__)
#: Partitions per batch (etcd refuses transactions of more than 128 operations by default).
MAX_BATCH = 100


async def alter_isr(
    store: MetadataStore,
    keyspace: Keyspace,
    proposal: AlterIsr,
    *,
    fence: Compare | None = None,
) -> PartitionState | None:
    """Write ``proposal`` if the partition is still as the leader saw it (and ``fence`` holds:
    see the module doc); the new state or None."""
    key = keyspace.partition(proposal.topic, proposal.partition)
    try:
        current = await store.get(key)
        changed = _changed(current, proposal)
        if current is None or changed is None:
            return None
        compares = [Compare.mod_revision(key, current.mod_revision)]
        if fence is not None:
            compares.append(fence)
        result = await store.txn(compares, [PutOp(key, changed.encode())])
    except MetadataStoreError as exc:
        _log.warning("ISR change of %s-%d failed: %s", proposal.topic, proposal.partition, exc)
        return None
    if not result.succeeded:
        return None
    _committed(changed)
    return changed


async def alter_isr_batch(
    store: MetadataStore,
    keyspace: Keyspace,
    proposals: Sequence[AlterIsr],
    *,
    fence: Compare | None = None,
) -> list[PartitionState | None]:
    """``alter_isr`` for each of ``proposals`` (distinct partitions) in two round trips while
    nobody else writes them (see the module doc); per proposal the new state or None."""
    results: list[PartitionState | None] = [None] * len(proposals)
    keys = [keyspace.partition(p.topic, p.partition) for p in proposals]
    try:
        read = await store.txn((), [GetOp(key) for key in keys])
    except MetadataStoreError as exc:
        _log.warning("ISR changes of %d partitions failed: %s", len(proposals), exc)
        return results
    writes: list[tuple[int, KeyValue, PartitionState]] = []
    for index, (proposal, response) in enumerate(zip(proposals, read.responses, strict=True)):
        current = response.kvs[0] if isinstance(response, GetResponse) and response.kvs else None
        try:
            changed = _changed(current, proposal)
        except ValueError:
            _log.exception("ISR change of %s-%d refused", proposal.topic, proposal.partition)
            continue
        if current is not None and changed is not None:
            writes.append((index, current, changed))
    if not writes:
        return results
    compares = [Compare.mod_revision(current.key, current.mod_revision) for _, current, _ in writes]
    if fence is not None:
        compares.append(fence)
    try:
        written = await store.txn(
            compares,
            [PutOp(current.key, changed.encode()) for _, current, changed in writes],
            [GetOp(fence.key)] if fence is not None else [],
        )
    except MetadataStoreError as exc:
        _log.warning("ISR changes of %d partitions failed: %s", len(writes), exc)
        return results
    if written.succeeded:
        for index, _, changed in writes:
            _committed(changed)
            results[index] = changed
        return results
    if fence is not None and _fenced(fence, written.responses):
        return results
    # Another writer changed one of the keys since the read: each alone, so it fails alone.
    alone = await asyncio.gather(
        *(alter_isr(store, keyspace, proposals[index], fence=fence) for index, _, _ in writes)
    )
    for (index, _, _), state in zip(writes, alone, strict=True):
        results[index] = state
    return results


class IsrWriter:
    """This broker's ISR proposals, written in batches (see the module doc)."""

    def __init__(
        self,
        store: Callable[[], MetadataStore | None],
        keyspace: Keyspace,
        *,
        max_batch: int = MAX_BATCH,
        fence: Callable[[], Compare | None] | None = None,
    ) -> None:
        """``fence``: this process's registration compare (see the module doc), None while it
        is not registered (nothing is written then); no ``fence``: unfenced (tests)."""
        self._store = store
        self._fence = fence
        self._keyspace = keyspace
        self._max_batch = max_batch
        self._queue: deque[tuple[AlterIsr, asyncio.Future[PartitionState | None]]] = deque()
        self._drain: asyncio.Task[None] | None = None
        #: Batches written (each one read and one write transaction while uncontended).
        self.batches = 0
        self._closed = False

    async def write(self, proposal: AlterIsr) -> PartitionState | None:
        """Write ``proposal`` with the next batch; the committed state, or None if it lost
        (or the writer is closed)."""
        if self._closed:
            return None
        future: asyncio.Future[PartitionState | None] = asyncio.get_running_loop().create_future()
        self._queue.append((proposal, future))
        if self._drain is None or self._drain.done():
            self._drain = asyncio.create_task(self._write_batches(), name="isr-writer")
        return await future

    async def close(self) -> None:
        """Stop writing; proposals still queued are answered None (not written)."""
        self._closed = True
        if self._drain is not None:
            self._drain.cancel()
            await asyncio.gather(self._drain, return_exceptions=True)
            self._drain = None
        while self._queue:
            _, future = self._queue.popleft()
            if not future.done():
                future.set_result(None)

    async def _write_batches(self) -> None:
        await asyncio.sleep(0)  # let the proposals of this loop iteration join the batch
        while self._queue:
            batch = self._next_batch()
            store = self._store()
            fence = self._fence() if self._fence is not None else None
            try:
                if store is None or (self._fence is not None and fence is None):
                    results: list[PartitionState | None] = [None] * len(batch)
                else:
                    results = await alter_isr_batch(
                        store, self._keyspace, [proposal for proposal, _ in batch], fence=fence
                    )
                    self.batches += 1
            except BaseException:
                for _, future in batch:
                    if not future.done():
                        future.set_result(None)
                raise
            for (_, future), state in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(state)

    def _next_batch(self) -> list[tuple[AlterIsr, asyncio.Future[PartitionState | None]]]:
        batch: list[tuple[AlterIsr, asyncio.Future[PartitionState | None]]] = []
        later: list[tuple[AlterIsr, asyncio.Future[PartitionState | None]]] = []
        seen: set[tuple[str, int]] = set()
        while self._queue and len(batch) < self._max_batch:
            item = self._queue.popleft()
            key = (item[0].topic, item[0].partition)
            if key in seen:
                later.append(item)
            else:
                seen.add(key)
                batch.append(item)
        self._queue.extendleft(reversed(later))
        return batch


def _fenced(fence: Compare, responses: Sequence[object]) -> bool:
    """Whether the failed write's registration read shows this process fenced (logged)."""
    response = responses[0] if responses else None
    held = response.kvs[0].value if isinstance(response, GetResponse) and response.kvs else None
    if held == fence.operand:
        return False
    _log.warning(
        "ISR changes refused: the registration %s is no longer this process's (%s); a newer "
        "process of this broker id, or a new data folder, fences its proposals",
        bytes(fence.key).decode(errors="replace"),
        "gone" if held is None else "replaced",
    )
    return True


def _changed(current: KeyValue | None, proposal: AlterIsr) -> PartitionState | None:
    """The state ``proposal`` writes over ``current``, or None when the partition moved on
    (ValueError for an ISR without the leader or with a non-replica)."""
    if current is None:
        return None
    state = PartitionState.decode(current.value)
    if (state.leader, state.leader_epoch, state.partition_epoch) != (
        proposal.leader_id,
        proposal.leader_epoch,
        proposal.expected_partition_epoch,
    ):
        _log.info(
            "ISR change of %s-%d dropped: state moved to leader %d epoch %d/%d",
            proposal.topic,
            proposal.partition,
            state.leader,
            state.leader_epoch,
            state.partition_epoch,
        )
        return None
    new_isr = proposal.new_isr
    if not set(new_isr) <= set(state.replicas) or proposal.leader_id not in new_isr:
        raise ValueError(f"ISR {list(new_isr)} must hold the leader and only replicas")
    return altered_state(state, proposal)


def altered_state(state: PartitionState, proposal: AlterIsr) -> PartitionState:
    """``state`` with the ISR of ``proposal`` (checked by the caller): members kept keep their
    data folder ids, the proposal's ids are recorded, leavers' ids go."""
    new_isr = tuple(proposal.new_isr)
    dirs = state.log_dirs_of(new_isr)
    dirs.update((b, d) for b, d in proposal.log_dirs if b in new_isr and d)
    return state.model_copy(
        update={"isr": new_isr, "isr_log_dirs": dirs, "partition_epoch": state.partition_epoch + 1}
    )


def _committed(changed: PartitionState) -> None:
    _log.info(
        "ISR of %s-%d -> %s (partition epoch %d)",
        changed.topic,
        changed.partition,
        list(changed.isr),
        changed.partition_epoch,
    )
