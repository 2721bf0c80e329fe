"""The reconcile driver: applies the decisions of ``decisions/partition_plan.reconcile`` to etcd
while this coordinator is the active controller.

Work follows change (issue 19): the driver subscribes to the metadata cache and notes what
each etcd event touched — a topic record or partition state marks that topic; a broker
registration or decommission, or a reload of the cache, marks everything (liveness and
draining bear on every partition) — but not a registration rewritten only for its load
sample. Loop: take the cache's snapshot and the marks together
(no await in between, so an event is either in the snapshot or marked for the next round),
decide for the marked topics only (every topic when everything is marked) — in steps of about
``STEP_PARTITIONS`` partitions with a turn for the event loop between them, all from that one
immutable snapshot (a full pass over 20,000 partitions is ~70 ms of Python) —, write, then wait
until the cache has seen what the round wrote or read and something is marked, or
``resync_interval_s`` passes (a full pass then: a safety net, since every decision follows
from some change). Events that arrive while a round writes are decided together in the next
one, so a burst of changes costs one pass over what it touched.

Every write is one transaction that carries the term's fence (controller key
``create_revision == epoch``) plus a compare-and-swap per key:

- creating partition states: the key must be absent (batches of ``batch_size``);
- updating one: its ``mod_revision`` must be the one whose value equals the state the decision
  was based on (read in the same batch, one ``GetOp`` transaction);
- deleting a topic: the topic record's ``mod_revision`` must be unchanged (still ``deleting``).

A failed compare means the snapshot was stale: nothing is written, and since the cache will
deliver the newer state (marking its topic), the next round decides again once the cache has
caught up with the newest revision of the keys the round found changed — not before, or it
would decide again from the same stale state. A failed fence ends the term (another
coordinator is active). Runs as one task per term; the caller cancels it when the term ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TypeVar

from yak.errors import MetadataStoreError
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import KeyKind, Keyspace, ParsedKey
from yak.metadata.models import BrokerRegistration, PartitionState
from yak.metadata.snapshot import ClusterSnapshot
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
from yak_coordinator.decisions.partition_plan import (
    Action,
    CreatePartitions,
    DeleteTopic,
    UpdatePartition,
    reconcile_steps,
)
from yak_coordinator.election import Term, fenced_txn
from yak_coordinator.metrics import ControllerStats

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
        resync_interval_s: float = 60.0,
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
        #: What changed since the last round's snapshot: every topic, or these topics.
        self._everything = True
        self._topics: set[str] = set()
        #: Each broker's registration as the decisions read it (no load sample), or None.
        self._registrations: dict[int, BrokerRegistration | None] = {}
        #: The newest revision of a key the current round found changed (its decision stale).
        self._seen = 0
        #: Rounds run, and the partitions they looked at (for tests and tools).
        self.rounds = 0
        self.partitions_decided = 0
        self._waiting = False

    @property
    def idle(self) -> bool:
        """Waiting with nothing to decide: every change the cache applied has been decided."""
        return self._waiting and not self._everything and not self._topics

    async def run(self, term: Term) -> None:
        """Reconcile until cancelled or until the term ends."""
        self._everything, self._topics = True, set()
        self._registrations = {
            broker_id: registration.model_copy(update={"load": None})
            for broker_id, registration in self._cache.snapshot.brokers.items()
        }
        unsubscribe = self._cache.subscribe(self._changed)
        try:
            while not term.ended:
                await self._round(term)
        finally:
            unsubscribe()

    def _changed(self, key: ParsedKey | None) -> None:
        if key is not None and key.kind is KeyKind.BROKER and key.broker_id is not None:
            if self._registration_moved(key.broker_id):
                self._everything = True
        elif key is None or key.kind is KeyKind.DECOMMISSION:
            self._everything = True
        elif key.kind in (KeyKind.TOPIC, KeyKind.PARTITION) and key.topic is not None:
            self._topics.add(key.topic)

    def _registration_moved(self, broker_id: int) -> bool:
        """Whether a registration event changed what decisions read: its presence, address,
        data folder or shutdown mark — not its load sample, which the broker rewrites every
        few seconds (docs/partitioning.md) and which would otherwise cost a full round each."""
        registration = self._cache.snapshot.brokers.get(broker_id)
        view = None if registration is None else registration.model_copy(update={"load": None})
        if broker_id in self._registrations and self._registrations[broker_id] == view:
            return False
        self._registrations[broker_id] = view
        return True

    async def _round(self, term: Term) -> None:
        snapshot = self._cache.snapshot
        topics = None if self._everything else self._topics
        self._everything, self._topics = False, set()
        self._seen = 0
        try:
            actions = await self.decide(snapshot, topics)
            self._count(snapshot, topics)
            revision = max(await self.apply(actions, term), self._seen)
        except MetadataStoreError as exc:
            log.warning("reconcile round failed (%s); retrying", exc)
            self._everything, revision = True, snapshot.revision + 1
        await self._wait(revision)

    async def decide(self, snapshot: ClusterSnapshot, topics: set[str] | None) -> list[Action]:
        """``reconcile`` for ``topics`` (None: all), giving the event loop a turn between its
        steps (``reconcile_steps``): a full pass over 20,000 partitions is ~70 ms of Python,
        which in one piece delayed everything else this process serves by as much."""
        actions: list[Action] = []
        steps = reconcile_steps(
            snapshot,
            auto_leader_rebalance=self._rebalance,
            max_drain_moves=self._max_drain_moves,
            topics=topics,
        )
        for index, step in enumerate(steps):
            if index:
                await asyncio.sleep(0)  # a turn for the loop between steps, not a wait
            actions += step
        return actions

    def _count(self, snapshot: ClusterSnapshot, topics: set[str] | None) -> None:
        self.rounds += 1
        if topics is None:
            self.partitions_decided += len(snapshot.partitions)
        else:
            self.partitions_decided += sum(len(snapshot.partitions_of(t)) for t in topics)

    async def _wait(self, revision: int) -> None:
        """Until the cache has reached ``revision`` and something changed, or for the resync
        interval (after which everything is decided again)."""

        def due(snapshot: ClusterSnapshot) -> bool:
            return snapshot.revision >= revision and (self._everything or bool(self._topics))

        self._waiting = True
        try:
            await self._cache.wait_for(due, self._resync_s)
        except TimeoutError:
            self._everything = True
        finally:
            self._waiting = False

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
                # Stale decision: decide again once the cache has the newer state.
                self._seen = max(self._seen, current.mod_revision if current else 0)
                continue
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
        return await fenced_txn(self._store, self._keyspace, term, compares, ops)


def _holds(current: KeyValue, expected: PartitionState) -> bool:
    try:
        return PartitionState.decode(current.value) == expected
    except ValueError:  # pydantic's ValidationError is a ValueError
        return False
