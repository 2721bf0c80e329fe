"""The reconcile driver: applies ``reconcile.reconcile`` decisions to etcd while this
coordinator is the active controller.

Loop: take the cache's snapshot, compute the actions, write them, wait until the cache moves
past the snapshot (an etcd change, including our own writes) or ``resync_interval_s`` passes,
repeat. Every write is one transaction that carries the term's fence (controller key
``create_revision == epoch``) plus a compare-and-swap per key:

- creating partition states: the key must be absent (batches of ``batch_size``);
- updating one: its ``mod_revision`` must be the one whose value equals the state the decision
  was based on (read in the same batch, one ``GetOp`` transaction);
- deleting a topic: the topic record's ``mod_revision`` must be unchanged (still ``deleting``).

A failed compare means the snapshot was stale: nothing is written and the next round decides
again from fresher state. A failed fence ends the term (another coordinator is active). Runs as
one task per term; the caller cancels it when the term ends.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import TypeVar

from yak.errors import MetadataStoreError
from yak.metadata.cache import ClusterSnapshot, MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import PartitionState
from yak.metadata.store import (
    Compare,
    DeleteOp,
    GetOp,
    GetResponse,
    KeyValue,
    MetadataStore,
    Op,
    PutOp,
    TxnResult,
)
from yak_coordinator.election import Term
from yak_coordinator.metrics import ControllerStats
from yak_coordinator.reconcile import (
    Action,
    CreatePartitions,
    DeleteTopic,
    UpdatePartition,
    reconcile,
)

__all__ = ["Reconciler"]

log = logging.getLogger(__name__)


_T = TypeVar("_T")


def _chunks(items: Sequence[_T], size: int) -> list[Sequence[_T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


class Reconciler:
    """Drives the cluster towards ``reconcile``'s desired state during one term at a time."""

    def __init__(
        self,
        store: MetadataStore,
        keyspace: Keyspace,
        cache: MetadataCache,
        *,
        auto_leader_rebalance: bool = True,
        max_drain_moves: int = 10,
        resync_interval_s: float = 5.0,
        batch_size: int = 100,  # etcd allows 128 operations per transaction by default
        stats: ControllerStats | None = None,
    ) -> None:
        self._stats = stats if stats is not None else ControllerStats()
        self._store = store
        self._keyspace = keyspace
        self._cache = cache
        self._rebalance = auto_leader_rebalance
        self._max_drain_moves = max_drain_moves
        self._resync_s = resync_interval_s
        self._batch = batch_size

    async def run(self, term: Term) -> None:
        """Reconcile until cancelled or until the term ends."""
        while not term.ended:
            snapshot = self._cache.snapshot
            try:
                actions = reconcile(
                    snapshot,
                    auto_leader_rebalance=self._rebalance,
                    max_drain_moves=self._max_drain_moves,
                )
                revision = await self.apply(actions, term)
            except MetadataStoreError as exc:
                log.warning("reconcile round failed (%s); retrying", exc)
                revision = 0
            await self._wait_past(max(revision, snapshot.revision + 1))

    async def _wait_past(self, revision: int) -> None:
        """Wait for the cache to reach ``revision``, or for the resync interval."""

        def reached(snapshot: ClusterSnapshot) -> bool:
            return snapshot.revision >= revision

        with contextlib.suppress(TimeoutError):
            await self._cache.wait_for(reached, self._resync_s)

    async def apply(self, actions: Sequence[Action], term: Term) -> int:
        """Write ``actions``; return the highest revision written (0 if none)."""
        revision = 0
        creates = [a for a in actions if isinstance(a, CreatePartitions)]
        updates = [a for a in actions if isinstance(a, UpdatePartition)]
        deletes = [a for a in actions if isinstance(a, DeleteTopic)]
        for create in creates:
            for states in _chunks(create.states, self._batch):
                revision = max(revision, await self._create(states, term))
        for chunk in _chunks(updates, self._batch):
            revision = max(revision, await self._update(chunk, term))
        for delete in deletes:
            revision = max(revision, await self._delete(delete, term))
        return revision

    async def _create(self, states: Sequence[PartitionState], term: Term) -> int:
        keys = [self._keyspace.partition(s.topic, s.partition) for s in states]
        result = await self._fenced(
            [Compare.absent(key) for key in keys],
            [PutOp(key, state.encode()) for key, state in zip(keys, states, strict=True)],
            term,
        )
        if result is None:
            return 0
        log.info("created %s partitions %s", states[0].topic, [s.partition for s in states])
        return result.revision

    async def _update(self, updates: Sequence[UpdatePartition], term: Term) -> int:
        keys = [self._keyspace.partition(u.before.topic, u.before.partition) for u in updates]
        read = await self._store.txn([], [GetOp(key) for key in keys])
        compares: list[Compare] = []
        puts: list[Op] = []
        written: list[UpdatePartition] = []
        for key, update, response in zip(keys, updates, read.responses, strict=True):
            assert isinstance(response, GetResponse)
            current = response.kvs[0] if response.kvs else None
            if current is None or not _holds(current, update.before):
                continue  # stale decision: the next round sees the newer state
            compares.append(Compare.mod_revision(key, current.mod_revision))
            puts.append(PutOp(key, update.after.encode()))
            written.append(update)
        if not puts:
            return 0
        result = await self._fenced(compares, puts, term)
        if result is None:
            return 0
        for update in written:
            after = update.after
            self._stats.on_partition_written(update.before, after, update.reason)
            log.info(
                "%s-%d: %s: leader %d (epoch %d), isr %s",
                after.topic,
                after.partition,
                update.reason,
                after.leader,
                after.leader_epoch,
                list(after.isr),
            )
        return result.revision

    async def _delete(self, delete: DeleteTopic, term: Term) -> int:
        topic_key = self._keyspace.topic(delete.topic)
        prefix = DeleteOp(self._keyspace.topic_partitions_prefix(delete.topic), prefix=True)
        if delete.orphan:
            result = await self._fenced([Compare.absent(topic_key)], [prefix], term)
        else:
            current = await self._store.get(topic_key)
            if current is None:
                return 0
            result = await self._fenced(
                [Compare.mod_revision(topic_key, current.mod_revision)],
                [prefix, DeleteOp(topic_key)],
                term,
            )
        if result is None:
            return 0
        log.info("deleted topic %s", delete.topic)
        return result.revision

    async def _fenced(
        self, compares: Sequence[Compare], ops: Sequence[Op], term: Term
    ) -> TxnResult | None:
        """One transaction guarded by the term's fence; None if a compare failed."""
        result = await self._store.txn(
            [term.fence, *compares], ops, [GetOp(self._keyspace.controller)]
        )
        if result.succeeded:
            return result
        response = result.responses[0]
        assert isinstance(response, GetResponse)
        if not response.kvs or not term.fence.holds(response.kvs[0]):
            term.end("another coordinator holds the controller key")
        return None


def _holds(current: KeyValue, expected: PartitionState) -> bool:
    try:
        return PartitionState.decode(current.value) == expected
    except ValueError:  # pydantic's ValidationError is a ValueError
        return False
