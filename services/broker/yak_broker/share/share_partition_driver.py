"""``SharePartitionDriver``: the asyncio owner of one share-partition's machine on the leader.

The machine (``state.SharePartition``) decides; the driver does the awaiting, in the order its
contract asks: apply an input, read the log when the machine asks (``share_reader``), then
hand the snapshot to the group-committed ``SnapshotCommitter`` whenever ``changes`` moved,
and answer only once that snapshot is durable.

**Applying is synchronous, saving is not.** An input is applied and its snapshot queued
without an await in between (the log reads are synchronous), so inputs of one share-partition
never interleave and need no lock; the wait for durability comes after, so the next inputs
apply (and queue newer snapshots, which hold this one's changes) while a save is in flight.
The snapshot is queued as a function and encoded when its save begins (``SnapshotCommitter``):
the inputs that pile up during one save cost one encoding of the window, not one each. The
committer keeps a key's saves in order, so an answer follows the durability of everything it
saw.

**A failed save ends the driver.** The machine has moved on past the failed snapshot (later
inputs applied on top of it), so it cannot roll back only its own change: the committer fails
that snapshot and the ones queued behind it, the driver closes (``closed``: the manager drops
it and loads the last durable snapshot on the next request), and every request waiting on an
undurable snapshot gets the save's error. Nothing undurable was answered, so at-least-once
holds: a failed acquisition's records come back when the reloaded state's locks expire or were
never taken; a failed acknowledgement is sent again or its lock expires.

Inputs (different share-partitions run concurrently and share saves):

- ``acquire``: acknowledgements first, then due delayed records (``DelaySource``), then
  acquire, reading and admitting log while the machine asks and nothing was acquired (a few
  rounds at most), then the read-back of the acquired records' whole batches (and, with
  ``whole_batches``, the acquisition of the available rest of the last one). Records the log
  no longer has, and ones the request's filter rejects, are accepted on the member's behalf.
- ``acknowledge``: the batches, each applied whole or refused (``InvalidRecordStateError``).
- the timer: one task per share-partition, sleeping until the earliest lock deadline or the
  next due delayed record, and firing at most once per ``TIMER_GRANULARITY_MS`` (everything
  due by then is taken in one fire); it ticks, takes due records and wakes long polls, but
  **saves nothing of its own** (below).
- dead letters: a background task copies pending dead letters to the group's dead-letter topic
  (``dead_letters``), then marks them ``dead_lettered`` and waits for that save; with no
  dead-letter topic they are marked at once (archived).

**Timer work is not persisted by the timer.** What ``tick`` and ``inject_due`` change is
re-derivable from the last saved snapshot: a lock that expired in memory is, in the restored
snapshot, a lock past its deadline, which the restored machine expires again at once with the
same delivery count and the same archive-at-the-limit decision; a due delayed record that
entered the window is above the snapshot's delay watermark, and the next leader's timer (or
first acquisition) injects it again from the delay index (injection is idempotent). Archiving
dead letters when there is no dead-letter topic follows from those. Nothing of it was answered
to anybody, so the timer only moves ``changes``: the next input's save includes it, before it
answers with any of it.

**Nor is an acquisition that hands out nothing** (and carried no acknowledgements): what it
changed — records read from the log and admitted (the scan offset moved, delayed ones held back),
due records injected, locks expired — is the same re-derivable kind, so it queues no snapshot and
answers at once. This matters to long polls: every append wakes the parked ShareFetch of its
partition, and on a topic with delays each wake admits records that are not due yet; a save per
wake would put a replicated write (and its wait) between a record coming due and its delivery.

``close`` stops the timer and the dead-letter task; every later input raises
``NotLeaderOrFollowerError`` (the manager drops drivers when leadership or the group goes), and
so does an input whose save completes after the close: the next leader may have read the state
before that save landed, so its outcome is not confirmed (at-least-once: the member sends the
acknowledgement again, or the lock expires).
Single event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import NamedTuple

from yak.clock import Clock
from yak.errors import NotLeaderOrFollowerError, YakError
from yak.filters import RecordFilter
from yak.protocol.broker_wire import Buffer
from yak.record.batch_header import parse_header
from yak_broker.share.dead_letters import DeadLetterSink, dead_letter_copy
from yak_broker.share.delay_source import DelaySource
from yak_broker.share.share_metrics import ShareCounters
from yak_broker.share.share_reader import ShareLog, find_records, read_back, scan
from yak_broker.share.snapshot_committer import SnapshotCommitter
from yak_broker.share.state.records import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecord,
)
from yak_broker.share.state.share_partition import AckResult, SharePartition
from yak_broker.share.state.snapshot import encode_snapshot
from yak_broker.share.state_store import SharePartitionKey

__all__ = ["TIMER_GRANULARITY_MS", "Acquisition", "SharePartitionDriver"]

_log = logging.getLogger(__name__)
#: Log reads one acquisition makes at most before answering what it has.
_READ_ROUNDS = 8
#: Wait before copying dead letters again after a failed produce.
_DEAD_LETTER_RETRY_S = 1.0
#: The timer fires at most once per this many ms: due times closer together share a fire
#: (a delayed record is at most this much later than its time, plus the loop's delay).
TIMER_GRANULARITY_MS = 5


class Acquisition(NamedTuple):
    """What one ShareFetch got from one share-partition."""

    records: list[Buffer]
    acquired: list[AcquiredRecord]
    #: One result per acknowledgement batch sent with the request: None when applied, else
    #: why it was refused (nothing of it changed).
    ack_results: Sequence[YakError | None] = ()


class SharePartitionDriver:
    """See the module doc."""

    def __init__(
        self,
        key: SharePartitionKey,
        machine: SharePartition,
        log: ShareLog,
        *,
        committer: SnapshotCommitter,
        clock: Clock,
        counters: ShareCounters,
        notify: Callable[[], object],
        delays: DelaySource | None = None,
        dead_letter_topic: str | None = None,
        dead_letters: DeadLetterSink | None = None,
    ) -> None:
        self.key = key
        self.machine = machine
        self.log = log
        self._committer = committer
        self._clock = clock
        self._counters = counters
        self._notify = notify
        self._delays = delays
        self._dlq_topic = dead_letter_topic
        self._sink = dead_letters
        #: ``machine.changes`` when the last snapshot was queued, and its durability.
        self._queued_changes = machine.changes
        self._last_save: asyncio.Future[None] | None = None
        self._timer: asyncio.Task[None] | None = None
        self._timer_at: int | None = None
        #: When the timer last fired (the next fire waits ``TIMER_GRANULARITY_MS`` after it).
        self._fired_at = -TIMER_GRANULARITY_MS
        self._dead_letter_task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def leader_epoch(self) -> int:
        return self.machine.leader_epoch

    @property
    def closed(self) -> bool:
        """Closed, or a save failed (the manager then loads the durable state again)."""
        return self._closed or _failed(self._last_save)

    # --- inputs --------------------------------------------------------------------------

    async def persist_now(self) -> None:
        """Save the current state even if unchanged (a new share-partition's starting point)."""
        self._check_open()
        self._queued_changes = -1
        await _durable(self._queue())
        self._check_open()  # closed meanwhile: another leader may have loaded without this

    async def acquire(
        self,
        member_id: str,
        acks: Sequence[AcknowledgementBatch],
        max_records: int,
        record_filter: RecordFilter | None,
        *,
        whole_batches: bool = False,
    ) -> Acquisition:
        self._check_open()
        now = self._clock.time_ms()
        ack_results = self._acknowledge(member_id, acks, now) if acks else []
        self._take_due(now)
        acquired = self._acquire(member_id, now, max_records, record_filter)
        records: list[Buffer] = []
        if not acquired and not acks:  # nothing to answer: nothing to save (module doc)
            self._follow_up(self._archive())
            return Acquisition(records, acquired, ack_results)
        if acquired:
            records, acquired = self._read_back(
                member_id, acquired, record_filter, now, whole_batches
            )
        await _durable(self._settle())
        self._check_open()  # closed meanwhile: another leader may have loaded without this
        self._counters.acquired.inc(len(acquired))
        return Acquisition(records, acquired, ack_results)

    async def acknowledge(
        self, member_id: str, acks: Sequence[AcknowledgementBatch]
    ) -> list[YakError | None]:
        """Apply ``acks``, each batch whole or refused (the others still apply); one result
        per batch, None when applied."""
        self._check_open()
        results = self._acknowledge(member_id, acks, self._clock.time_ms())
        await _durable(self._settle())
        self._check_open()  # closed meanwhile: another leader may have loaded without this
        return results

    def close(self) -> None:
        """Stop the timer and the dead-letter copies; later inputs raise NOT_LEADER."""
        self._closed = True
        for task in (self._timer, self._dead_letter_task):
            if task is not None:
                task.cancel()
        self._timer = self._dead_letter_task = None

    # --- steps ---------------------------------------------------------------------------

    def _ended(self) -> bool:
        """``closed``, read after an await (a method, so no narrowing holds it stale)."""
        return self.closed

    def _check_open(self) -> None:
        if self.closed:
            raise NotLeaderOrFollowerError(
                f"share-partition {self.key.group}/{self.key.topic}-{self.key.partition} "
                "is no longer served here",
                topic=self.key.topic,
                partition=self.key.partition,
            )

    def _acknowledge(
        self, member_id: str, acks: Sequence[AcknowledgementBatch], now: int
    ) -> list[YakError | None]:
        results: list[AckResult] = self.machine.acknowledge(member_id, acks, now)
        released = False
        for batch, result in zip(acks, results, strict=True):
            if result is None:
                size = batch.last_offset - batch.first_offset + 1
                self._counters.acknowledged(batch.type).inc(size)
                released |= batch.type == AcknowledgeType.RELEASE
        if released:
            self._notify()
        return list(results)

    def _take_due(self, now: int) -> bool:
        """Feed due delayed records to the machine; whether any entered."""
        if self._delays is None:
            return False
        machine = self.machine
        before = machine.changes
        mark = machine.delay_watermark
        entries = self._delays.due(mark.deliver_at_ms, now, machine.scan_offset)
        machine.inject_due(entries, now)
        return machine.changes != before

    def _acquire(
        self, member_id: str, now: int, max_records: int, record_filter: RecordFilter | None
    ) -> list[AcquiredRecord]:
        machine = self.machine
        for _ in range(_READ_ROUNDS):
            acquired = machine.acquire(member_id, now, max_records)
            if acquired:
                return acquired
            request = machine.read_request()
            if request is None or request.offset >= self.log.high_watermark:
                return []
            found = scan(self.log, request, record_filter, delays=self._delays is not None)
            if found.next_offset <= machine.scan_offset:
                return []
            machine.admit(found.records, found.next_offset)
        return machine.acquire(member_id, now, max_records)

    def _read_back(
        self,
        member_id: str,
        acquired: list[AcquiredRecord],
        record_filter: RecordFilter | None,
        now: int,
        whole_batches: bool,
    ) -> tuple[list[Buffer], list[AcquiredRecord]]:
        """The batches holding ``acquired``; the records not to be given are accepted. With
        ``whole_batches`` (and no filter), the available rest of the last batch is acquired
        too: the answer carries that batch anyway, and the next acquisition need not read it
        again (Kafka's ``batch_optimized`` acquire mode, KIP-1206)."""
        found = read_back(self.log, [a.offset for a in acquired], record_filter)
        if whole_batches and record_filter is None and found.batches:
            end = parse_header(found.batches[-1]).last_offset
            last = acquired[-1].offset
            if end > last:
                acquired = acquired + self.machine.acquire_through(member_id, now, last + 1, end)
        dropped = set(found.missing) | set(found.rejected)
        if not dropped:
            return found.batches, acquired
        accept = [AcknowledgementBatch(o, o, AcknowledgeType.ACCEPT) for o in sorted(dropped)]
        self.machine.acknowledge(member_id, accept, now)
        return found.batches, [a for a in acquired if a.offset not in dropped]

    def _settle(self) -> asyncio.Future[None] | None:
        """Archive dead letters when there is no dead-letter topic, queue the snapshot,
        re-arm; the queued snapshot's durability (None: nothing changed)."""
        pending = self._archive()
        saved = self._queue()
        self._follow_up(pending)
        return saved

    def _archive(self) -> bool:
        """Archive dead letters at once when there is no dead-letter topic; whether copies
        to a dead-letter topic are pending."""
        machine = self.machine
        pending = machine.dead_letter_pending()
        if pending and self._dlq_topic is None:
            machine.dead_lettered(d.offset for d in pending)
            self._counters.dead_lettered.inc(len(pending))
            return False
        return bool(pending)

    def _follow_up(self, dead_letters: bool) -> None:
        """Re-arm the timer; start copying dead letters if some are pending."""
        self._arm()
        if dead_letters and self._dead_letter_task is None and not self.closed:
            self._dead_letter_task = asyncio.create_task(
                self._copy_dead_letters(), name=f"share-dlq-{self.key.encode()!r}"
            )

    def _queue(self) -> asyncio.Future[None] | None:
        """Hand the snapshot to the committer if ``changes`` moved since the last one."""
        machine = self.machine
        if machine.changes == self._queued_changes:
            return None
        self._queued_changes = machine.changes
        saved = self._committer.submit(self.key, lambda: encode_snapshot(machine.snapshot()))
        if saved is not self._last_save:
            self._last_save = saved
            saved.add_done_callback(self._saved)
        return saved

    def _saved(self, saved: asyncio.Future[None]) -> None:
        if _failed(saved) and not self._closed:
            error = "cancelled" if saved.cancelled() else repr(saved.exception())
            _log.warning("share-partition %s: a save failed (%s): reloading", self.key, error)
            self.close()

    # --- timers --------------------------------------------------------------------------

    def _wake_at(self) -> int | None:
        machine = self.machine
        times = [machine.next_deadline_ms]
        if self._delays is not None:
            times.append(self._delays.next_due_ms(machine.delay_watermark.deliver_at_ms))
        return min((t for t in times if t is not None), default=None)

    def _arm(self) -> None:
        """One timer at the earliest time the machine may have work, not sooner than
        ``TIMER_GRANULARITY_MS`` after the last fire."""
        if self.closed:
            return
        when = self._wake_at()
        if when is not None:
            when = max(when, self._fired_at + TIMER_GRANULARITY_MS)
        if when is None or (self._timer is not None and self._timer_at == when):
            return
        if self._timer is not None and self._timer_at is not None and self._timer_at < when:
            return  # the earlier timer re-arms when it fires
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = asyncio.create_task(self._fire(when), name="share-timer")

    async def _fire(self, when: int) -> None:
        await self._clock.sleep(max(when - self._clock.time_ms(), 0) / 1000)
        self._timer = self._timer_at = None
        try:
            if self.closed:
                return
            now = self._fired_at = self._clock.time_ms()
            machine = self.machine
            changes, expired = machine.changes, machine.expired_locks
            machine.tick(now)
            if machine.expired_locks != expired:
                self._counters.expired.inc(machine.expired_locks - expired)
            self._take_due(now)
            moved = changes != machine.changes
            self._follow_up(self._archive())  # no save: see the module doc
            if moved:
                self._notify()
        except Exception:
            _log.exception("share-partition %s: timer work failed", self.key)
            self._retry_later()

    def _retry_later(self) -> None:
        if not self.closed and self._timer is None:
            when = self._clock.time_ms() + int(_DEAD_LETTER_RETRY_S * 1000)
            self._timer_at = when
            self._timer = asyncio.create_task(self._fire(when), name="share-timer")

    # --- dead letters --------------------------------------------------------------------

    async def _copy_dead_letters(self) -> None:
        try:
            while not self.closed:
                pending = self.machine.dead_letter_pending()
                if not pending or self._sink is None or self._dlq_topic is None:
                    return
                try:
                    found = find_records(self.log, [d.offset for d in pending])
                    copies = [
                        dead_letter_copy(
                            found[d.offset],
                            d,
                            group=self.key.group,
                            topic=self.key.topic,
                            partition=self.key.partition,
                        )
                        for d in pending
                        if d.offset in found
                    ]
                    if copies:
                        await self._sink.produce(self._dlq_topic, self.key.partition, copies)
                    if self._ended():  # the next leader copies them again
                        return
                    self.machine.dead_lettered(d.offset for d in pending)
                    await _durable(self._queue())
                    self._counters.dead_lettered.inc(len(pending))
                except Exception as exc:  # the topic's leader, the produce, the save: retried
                    _log.warning("share-partition %s: dead letters not copied: %r", self.key, exc)
                    await self._clock.sleep(_DEAD_LETTER_RETRY_S)
        finally:
            if asyncio.current_task() is self._dead_letter_task:
                self._dead_letter_task = None


def _failed(saved: asyncio.Future[None] | None) -> bool:
    """Whether ``saved`` ended without making its snapshot durable."""
    return (
        saved is not None and saved.done() and (saved.cancelled() or saved.exception() is not None)
    )


async def _durable(saved: asyncio.Future[None] | None) -> None:
    """Wait until a queued snapshot is durable (None: nothing to wait for); raises the
    save's error. Shielded: a request that goes leaves the save to the others."""
    if saved is not None:
        await asyncio.shield(saved)
