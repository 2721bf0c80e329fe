"""The broker's delay indexer: a delay index on every replica of a topic with delays enabled.

docs/decisions.md, "Delayed and scheduled delivery": every replica (leaders and followers alike,
so a new leader has it) of a topic with ``delayed.delivery.enable=true`` keeps a delay index
derived from its log (``storage.delay_index``). ``DelayIndexer`` owns one ``PartitionDelays``
per such replica:

- **Which replicas.** ``sync()`` (the replica manager calls it after each plan it carried out:
  replicas created, deleted, or their topic's configs changed) makes ``run`` reconcile: open the
  index of each hosted replica whose topic allows delays, detach the ones whose topic no longer
  does or whose log is gone or was replaced. Delays switched off and on again resume from the
  index's cursor, so what was appended meanwhile is indexed then. A replica asked for before
  the reconcile reached it (``partition``) is opened on the spot.
- **Indexing, woken by appends.** A log append calls ``PartitionDelays.appended``, which puts
  the partition in the queue and sets one event: no polling. ``run`` takes one bounded read
  (``PartitionDelays.index_step``: at most ``read_bytes``) per queued partition per turn and
  yields the loop between steps, so a long backlog never makes a lease keep-alive late.
- **Checkpoints** (``run_checkpoints``): after something changed, wait ``checkpoint_interval_ms``
  (a timer by nature: it bounds how much is re-indexed after a crash), then checkpoint every
  changed index — tickets prepared on the loop, written on one worker thread per batch of
  ``_CHECKPOINT_BATCH``, handed back on the loop (``PartitionDelays.checkpoint_done``) — and
  forget old buckets.
- **Forgetting.** Buckets are deleted once every due time in them is older than
  ``keep_due_ms`` before the lowest delay watermark of the partition's live share-partition
  sources here (``now`` when there are none). The margin keeps what a share-partition that moves
  here (its watermark restored from its snapshot, possibly behind) may still need.
- **Share-partitions** get ``delay_source(topic, partition)``: an ``IndexedDelaySource`` for a
  topic with delays enabled, None otherwise (no delays: records are delivered at their offset).

Cost: ``sync`` passes over the hosted replicas once per batch of metadata changes (a dict
lookup each, the loop yielded every ``_CHUNK``); an append costs a dict write and an event set.

Single event loop; only ``write_checkpoint`` runs on worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Protocol

from yak.delays import delay_settings
from yak.metadata.snapshot import ClusterSnapshot
from yak.types import TopicPartition
from yak_broker.server.partition_delays import DEFAULT_READ_BYTES, PartitionDelays
from yak_broker.share.index_delay_source import IndexedDelaySource
from yak_broker.storage.delay_index import DelayCheckpoint, DelayIndex, write_checkpoint
from yak_broker.storage.log import Log

__all__ = ["DEFAULT_KEEP_DUE_MS", "DelayIndexer", "HostedReplica"]

_log = logging.getLogger(__name__)
#: Past due times kept after the lowest share-partition watermark (and after now): 1 day.
DEFAULT_KEEP_DUE_MS = 86_400_000
_CHUNK = 1_000
_CHECKPOINT_BATCH = 64


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class HostedReplica(Protocol):
    """A replica hosted here, as the indexer sees it (``replica_roles.Replica``)."""

    @property
    def log(self) -> Log: ...


class _Lender:
    """Lends the current index of ``tp`` to its delay sources (``IndexedPartition``)."""

    def __init__(self, indexer: DelayIndexer, tp: TopicPartition) -> None:
        self._indexer, self._tp = indexer, tp

    def index_through(self, offset: int) -> DelayIndex | None:
        partition = self._indexer.partition(self._tp)
        return partition.index_through(offset) if partition is not None else None

    def covered_offset(self) -> int:
        partition = self._indexer.partition(self._tp)
        return partition.covered_offset() if partition is not None else 0

    def advance(self) -> None:
        partition = self._indexer.partition(self._tp)
        if partition is not None:
            partition.advance()


class DelayIndexer:
    """The delay indexes of the replicas hosted here (see the module doc)."""

    def __init__(
        self,
        replicas: Callable[[], Mapping[TopicPartition, HostedReplica]],
        snapshot: Callable[[], ClusterSnapshot],
        *,
        now_ms: Callable[[], int] = _now_ms,
        checkpoint_interval_ms: int = 10_000,
        keep_due_ms: int = DEFAULT_KEEP_DUE_MS,
        read_bytes: int = DEFAULT_READ_BYTES,
    ) -> None:
        self._replicas = replicas
        self._snapshot = snapshot
        self.now_ms = now_ms
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.keep_due_ms = keep_due_ms
        self._read_bytes = read_bytes
        self._partitions: dict[TopicPartition, PartitionDelays] = {}
        self._queue: dict[TopicPartition, PartitionDelays] = {}  # insertion order: FIFO
        self._sources: dict[TopicPartition, weakref.WeakSet[IndexedDelaySource]] = {}
        self._work = asyncio.Event()
        self._changed = asyncio.Event()
        self._resync = True
        self._tasks: list[asyncio.Task[None]] = []
        #: The checkpoint batch on a worker thread, if any.
        self._writing: asyncio.Task[list[BaseException | None]] | None = None

    @property
    def partitions(self) -> Mapping[TopicPartition, PartitionDelays]:
        return self._partitions

    def enabled(self, topic: str) -> bool:
        """Whether ``topic`` exists here and allows delays (``delayed.delivery.enable``)."""
        record = self._snapshot().topics.get(topic)
        return record is not None and not record.deleting and delay_settings(record.configs).enabled

    # --- which replicas ----------------------------------------------------------------------

    def sync(self) -> None:
        """The hosted replicas or their topics changed: reconcile at ``run``'s next turn."""
        self._resync = True
        self._work.set()

    def partition(self, tp: TopicPartition) -> PartitionDelays | None:
        """The index of the replica ``tp`` (opened now if its topic allows delays), or None."""
        found = self._partitions.get(tp)
        if found is not None:
            return found
        replica = self._replicas().get(tp)
        if replica is None or not self.enabled(tp.topic):
            return None
        return self._open(tp, replica.log)

    def _open(self, tp: TopicPartition, log: Log) -> PartitionDelays:
        partition = PartitionDelays.open(
            tp, log, self._enqueue, self.now_ms, self._read_bytes, self._forget_partition
        )
        self._partitions[tp] = partition
        self._changed.set()
        return partition

    def _forget_partition(self, partition: PartitionDelays) -> None:
        if self._partitions.get(partition.tp) is partition:
            del self._partitions[partition.tp]
        if self._queue.get(partition.tp) is partition:
            del self._queue[partition.tp]
        self.sync()  # e.g. delays switched off and on while a checkpoint held the close

    async def reconcile(self) -> None:
        """Open and detach indexes to match the hosted replicas and their topics' configs."""
        replicas = self._replicas()
        enabled: dict[str, bool] = {}
        for tp, partition in list(self._partitions.items()):
            replica = replicas.get(tp)
            if replica is None or replica.log is not partition.log or not self.enabled(tp.topic):
                partition.detach()
        for count, (tp, replica) in enumerate(list(replicas.items()), 1):
            if tp.topic not in enabled:
                enabled[tp.topic] = self.enabled(tp.topic)
            if enabled[tp.topic] and tp not in self._partitions:
                try:
                    self._open(tp, replica.log)
                except OSError as exc:
                    _log.error("opening the delay index of %s failed: %s", tp, exc)
            if count % _CHUNK == 0:
                await asyncio.sleep(0)
                replicas = self._replicas()  # may have changed meanwhile: re-read

    # --- indexing ----------------------------------------------------------------------------

    def _enqueue(self, partition: PartitionDelays) -> None:
        self._queue[partition.tp] = partition
        self._work.set()

    async def run(self) -> None:
        """Reconcile when asked and index the queued partitions, until cancelled."""
        while True:
            await self._work.wait()
            self._work.clear()
            if self._resync:
                self._resync = False
                await self.reconcile()
            await self.drain()

    async def drain(self) -> None:
        """Index every queued partition up to its log end, one bounded step at a time."""
        while self._queue:
            tp = next(iter(self._queue))
            partition = self._queue.pop(tp)
            try:
                more = partition.index_step()
            except Exception:  # the next append queues it again
                _log.exception("indexing the delays of %s failed", tp)
                more = False
            if more:
                self._queue[tp] = partition
            self._changed.set()
            await asyncio.sleep(0)

    # --- checkpoints and forgetting ----------------------------------------------------------

    async def run_checkpoints(self) -> None:
        """After each change, wait the interval, then checkpoint; until cancelled."""
        while True:
            await self._changed.wait()
            await asyncio.sleep(self.checkpoint_interval_ms / 1000)
            self._changed.clear()
            await self.checkpoint_all()

    async def checkpoint_all(self) -> None:
        """Forget old buckets, then make every changed index durable (off the loop)."""
        now = self.now_ms()
        tickets: list[tuple[PartitionDelays, DelayCheckpoint]] = []
        for partition in list(self._partitions.values()):
            self._forget_due(partition, now)
            ticket = partition.prepare_checkpoint()
            if ticket is not None:
                tickets.append((partition, ticket))
        for start in range(0, len(tickets), _CHECKPOINT_BATCH):
            await self._write(tickets[start : start + _CHECKPOINT_BATCH])

    def _forget_due(self, partition: PartitionDelays, now: int) -> None:
        marks = [s.watermark_ms for s in self._sources.get(partition.tp, ())]
        lowest = min([now, *(mark for mark in marks if mark is not None)])
        if partition.index.forget_through(lowest - self.keep_due_ms):
            partition.dirty = True

    async def _write(self, batch: list[tuple[PartitionDelays, DelayCheckpoint]]) -> None:
        job = self._writing = asyncio.create_task(
            asyncio.to_thread(_write_tickets, [t for _, t in batch])
        )
        try:
            failures = await asyncio.shield(job)
        except asyncio.CancelledError:
            failures = await job  # the thread finishes either way: hand the tickets back
            _hand_back(batch, failures)
            raise
        _hand_back(batch, failures)

    # --- share-partitions --------------------------------------------------------------------

    def delay_source(self, topic: str, partition: int) -> IndexedDelaySource | None:
        """The share manager's hook: the delay source of ``(topic, partition)`` here (a
        ``share.delay_source.DelaySource``); None for a topic without delays, whose
        share-partitions then deliver every record at its offset."""
        if not self.enabled(topic):
            return None
        tp = TopicPartition(topic, partition)
        source = IndexedDelaySource(_Lender(self, tp))
        self._sources.setdefault(tp, weakref.WeakSet()).add(source)
        return source

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self.sync()
        self._tasks = [
            asyncio.create_task(self.run(), name="delay-indexer"),
            asyncio.create_task(self.run_checkpoints(), name="delay-checkpoints"),
        ]

    async def stop(self) -> None:
        """Stop the tasks, then checkpoint and detach every index."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for partition in list(self._partitions.values()):
            partition.detach()


def _write_tickets(tickets: list[DelayCheckpoint]) -> list[BaseException | None]:
    """On a worker thread: write each ticket; what each failed with (None: written)."""
    failures: list[BaseException | None] = []
    for ticket in tickets:
        try:
            write_checkpoint(ticket)
        except OSError as exc:
            failures.append(exc)
        else:
            failures.append(None)
    return failures


def _hand_back(
    batch: list[tuple[PartitionDelays, DelayCheckpoint]], failures: list[BaseException | None]
) -> None:
    for (partition, ticket), failed in zip(batch, failures, strict=True):
        partition.checkpoint_done(ticket, failed)
