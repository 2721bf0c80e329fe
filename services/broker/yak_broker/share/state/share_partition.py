"""``SharePartition``: one share group by one topic partition, as a pure state machine (KIP-932's
model; docs/decisions.md, "Share groups: where their state lives" and "Delayed and scheduled
delivery").

**State.** ``start_offset`` (SPSO): every record below it is complete, except delayed records
that came due after SPSO passed them (they sit in the window below SPSO until complete).
``scan_offset`` (SPEO): the next offset not yet read from the log. Between them the in-flight
window (``InFlightWindow``): per record ``AVAILABLE``, ``ACQUIRED`` (member, lock deadline),
``ACKNOWLEDGED`` or ``ARCHIVED`` (with a dead-letter reason while its copy to the dead-letter
topic is pending), a delivery count and a timestamp. An offset between SPSO and SPEO that is
not in the window is complete — absent from the log (compacted, a control batch), rejected by
the reading request's filter — or delayed and owed by the delay index. ``delay_watermark``:
every delay-index entry at or before it, from ``origin_offset`` up, has entered the window.

**Rules.**
- ``acquire`` hands out available records, lowest offset first, locked until now + the lock
  duration, delivery count + 1. Once none is left and the window has room, ``read_request``
  asks the driver for log, which it feeds to ``admit``: a record due later than the delay
  watermark is skipped (the index owes it), a record the filter rejected is done at once.
- ``acknowledge`` applies batches; a batch naming a record the member does not hold (another
  state, another member, or a lock expired even if ``tick`` has not run yet) fails whole with
  ``InvalidRecordStateError`` and changes nothing. A released or expired record whose delivery
  count reached the limit is archived (dead-letter reason "max delivery attempts") instead of
  offered again, so no count ever exceeds the limit.
- ``tick`` expires locks and returns the next deadline: one timer per share-partition.
- Archived records with a reason stay (and are snapshotted) until ``dead_lettered``: the
  dead-letter copy is at least once across crashes.
- SPSO only moves forward, over complete records, which are then forgotten.

**Driver contract.** Persist ``snapshot()`` whenever ``changes`` moved, before answering the
requests that moved it; restore with ``SharePartition.restore`` (acquired records keep their
member and deadline). A filter applied to records handed out by ``acquire`` (released or
delayed ones, read after the fact) is the driver's: it accepts the ones the filter rejects.
Time is an argument; nothing here awaits, reads a clock or does I/O. Not thread-safe: one
owner applies one input at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import repeat
from typing import cast

from yak.errors import FencedLeaderEpochError, InvalidRecordStateError, InvalidRequestError
from yak_broker.share.state.records import (
    MAX_OFFSET,
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecord,
    DeadLetter,
    DeadLetterReason,
    DelayWatermark,
    DueEntry,
    LogRange,
    LogRecord,
    ReadRequest,
    RecordState,
    RecordView,
    Run,
    ShareSettings,
    ShareSnapshot,
    ShareStats,
)
from yak_broker.share.state.window import InFlightWindow

__all__ = ["AckResult", "SharePartition"]

#: Per acknowledgement batch: None when applied, else why it changed nothing.
AckResult = InvalidRecordStateError | InvalidRequestError | None

_AVAILABLE = RecordState.AVAILABLE
_ACQUIRED = RecordState.ACQUIRED
_ACKNOWLEDGED = RecordState.ACKNOWLEDGED
_ARCHIVED = RecordState.ARCHIVED
_NO_REASON = DeadLetterReason.NONE
_ACK_TYPES = frozenset(AcknowledgeType)
#: A new share-partition's delay watermark: no delay-index entry has entered yet.
_NOTHING_DUE = DelayWatermark(0)


class SharePartition:
    """See the module doc."""

    def __init__(
        self,
        settings: ShareSettings,
        *,
        start_offset: int,
        leader_epoch: int = 0,
        delay_watermark: DelayWatermark = _NOTHING_DUE,
    ) -> None:
        if start_offset < 0:
            raise ValueError(f"start offset must not be negative: {start_offset}")
        self.settings = settings
        self.leader_epoch = leader_epoch
        self.origin_offset = start_offset
        self.start_offset = start_offset
        self.scan_offset = start_offset
        self.delay_watermark = delay_watermark
        #: Bumped by every change of durable state: the driver persists when it moved.
        self.changes = 0
        self._window = InFlightWindow()
        #: At or below the earliest lock deadline (exact after ``tick``); None: nothing locked.
        self._deadline_floor: int | None = None
        #: A record below SPSO became complete since the last ``_advance``.
        self._below_done = False
        #: Locks ``tick`` has expired so far (not state: the driver's metrics read it).
        self.expired_locks = 0

    # --- reading the log -----------------------------------------------------------------

    def read_request(self) -> ReadRequest | None:
        """What to read from the log next, when no record is available and there is room."""
        room = self.settings.max_in_flight - len(self._window)
        if room <= 0 or self._window.states.find(_AVAILABLE) >= 0:
            return None
        return ReadRequest(self.scan_offset, room)

    def admit(self, records: Iterable[LogRecord | LogRange], next_offset: int) -> int:
        """Take what the driver read at ``scan_offset`` (in offset order, below
        ``next_offset``, where the read ended); returns how many records entered the window.
        A ``LogRange`` enters as one run (due at once, accepted), as its records would.

        Records below ``scan_offset`` (a read that raced another) are ignored. A full window
        stops the intake: ``scan_offset`` stays at the first record not taken.
        """
        if next_offset <= self.scan_offset:
            return 0
        window, limit, mark = self._window, self.settings.max_in_flight, self.delay_watermark
        entered, previous, scan_to = 0, -1, next_offset
        for record in records:
            if isinstance(record, LogRange):
                first, last = record.first_offset, record.last_offset
                if first <= previous or last >= next_offset or last < first:
                    raise ValueError(f"records {first}-{last} out of order or past {next_offset}")
                previous = last
                first = max(first, self.scan_offset)
                if first > last:
                    continue
                taken = min(last, first + limit - len(window) - 1)
                if taken >= first:
                    stamp = record.timestamp_ms
                    window.extend(Run(first, taken, _AVAILABLE, 0, None, 0, _NO_REASON, stamp))
                    entered += taken - first + 1
                if taken < last:  # the window is full: the scan stays at the first not taken
                    scan_to = max(taken + 1, first)
                    break
                continue
            if record.offset <= previous or record.offset >= next_offset:
                raise ValueError(f"record {record.offset} out of order or past {next_offset}")
            previous = record.offset
            if record.offset < self.scan_offset or not record.accepted:
                continue
            deliver_at = record.deliver_at_ms
            if deliver_at is not None and (deliver_at, record.offset) > mark:
                continue  # owed by the delay index
            if len(window) >= limit:
                scan_to = record.offset
                break
            window.append(record.offset, _AVAILABLE, record.timestamp_ms)
            entered += 1
        if entered or scan_to != self.scan_offset:
            self.scan_offset = scan_to
            self._changed()
        return entered

    def inject_due(self, entries: Iterable[DueEntry], through_ms: int) -> DelayWatermark:
        """Make due delayed records available: ``entries`` are every delay-index entry after
        the watermark and due at or before ``through_ms`` (any order; ones already taken,
        below ``origin_offset``, or at or past ``scan_offset`` — ``admit`` takes those — are
        passed over). Returns the new watermark: short of ``through_ms`` when the window
        filled up, and the driver offers the rest again later."""
        mark = tuple(self.delay_watermark)
        end = (through_ms, MAX_OFFSET)
        if end <= mark:
            return self.delay_watermark
        window, limit = self._window, self.settings.max_in_flight
        for offset, deliver_at in sorted(entries, key=lambda e: (e.deliver_at_ms, e.offset)):
            key = (deliver_at, offset)
            if key <= mark or key > end:
                continue
            taken = offset < self.origin_offset or offset >= self.scan_offset
            if not taken and window.index(offset) is None:
                if len(window) >= limit:
                    break
                window.insert(offset, _AVAILABLE, deliver_at)
            mark = key
        else:
            mark = end
        if mark != tuple(self.delay_watermark):
            self.delay_watermark = DelayWatermark(*mark)
            self._changed()
        return self.delay_watermark

    # --- members -------------------------------------------------------------------------

    def acquire(self, member_id: str, now_ms: int, max_records: int) -> list[AcquiredRecord]:
        """Lock up to ``max_records`` available records to ``member_id`` (expired locks are
        released first)."""
        if not member_id or max_records < 0:
            raise ValueError(f"bad acquisition: member {member_id!r}, {max_records} records")
        if self._deadline_floor is not None and self._deadline_floor <= now_ms:
            self.tick(now_ms)
        deadline = now_ms + self.settings.lock_duration_ms
        out = self._take(member_id, deadline, 0, max_records, None)
        self._acquired(out, deadline)
        return out

    def acquire_through(
        self, member_id: str, now_ms: int, first_offset: int, last_offset: int
    ) -> list[AcquiredRecord]:
        """Lock to ``member_id`` every available record in ``[first_offset, last_offset]``
        (the rest of a batch an acquisition ends in: ``batch_optimized`` acquisitions)."""
        if not member_id or last_offset < first_offset:
            return []
        window = self._window
        deadline = now_ms + self.settings.lock_duration_ms
        start, stop = window.lower_bound(first_offset), window.lower_bound(last_offset + 1)
        out = self._take(member_id, deadline, start, stop - start, stop)
        self._acquired(out, deadline)
        return out

    def _take(
        self, member_id: str, deadline: int, start: int, most: int, stop: int | None
    ) -> list[AcquiredRecord]:
        """Acquire up to ``most`` available slots from slot ``start`` (below ``stop``), run by
        run of consecutive available slots at C speed."""
        window = self._window
        out: list[AcquiredRecord] = []
        states, offsets, counts = window.states, window.offsets, window.counts
        end = len(window) if stop is None else stop
        i = states.find(_AVAILABLE, start, end)
        while i >= 0 and len(out) < most:
            j = min(window.available_end(i), end, i + most - len(out))
            window.acquire_span(i, j, member_id, deadline)
            # tuple.__new__ at C speed: the named tuple's own __new__ is a Python call per record
            fields = zip(offsets[i:j], counts[i:j], strict=True)
            made = map(tuple.__new__, repeat(AcquiredRecord), fields)
            out.extend(cast("Iterator[AcquiredRecord]", made))
            i = states.find(_AVAILABLE, j, end)
        return out

    def _acquired(self, out: list[AcquiredRecord], deadline: int) -> None:
        if out:
            floor = self._deadline_floor
            self._deadline_floor = deadline if floor is None else min(floor, deadline)
            self.changes += 1

    def acknowledge(
        self, member_id: str, batches: Iterable[AcknowledgementBatch], now_ms: int
    ) -> list[AckResult]:
        """Apply each batch whole, or not at all (its entry in the answer says why)."""
        results: list[AckResult] = []
        for batch in batches:
            error = self._refusal(member_id, batch, now_ms)
            if error is None:
                self._apply(batch, now_ms)
            results.append(error)
        if any(r is None for r in results):
            self._changed()
        return results

    def release_member(self, member_id: str) -> int:
        """A member left: its acquired records are offered again; returns how many."""
        window = self._window
        held = [i for i in window.slots_in(_ACQUIRED) if window.members[i] == member_id]
        for i in held:
            self._release(i)
        if held:
            self._changed()
        return len(held)

    def tick(self, now_ms: int) -> int | None:
        """Release (or archive, at the delivery limit) every lock due by ``now_ms``; returns
        the next lock deadline, None when nothing is locked."""
        window, expired, upcoming = self._window, 0, None
        for i in window.slots_in(_ACQUIRED):
            deadline = window.deadlines[i]
            if deadline <= now_ms:
                self._release(i)
                expired += 1
            elif upcoming is None or deadline < upcoming:
                upcoming = deadline
        self._deadline_floor = upcoming
        if expired:
            self.expired_locks += expired
            self._changed()
        return upcoming

    @property
    def next_deadline_ms(self) -> int | None:
        """When ``tick`` may have work (at or before the earliest lock deadline)."""
        return self._deadline_floor

    # --- dead letters --------------------------------------------------------------------

    def dead_letter_pending(self) -> list[DeadLetter]:
        """Archived records whose copy to the dead-letter topic is still owed, by offset."""
        return self._window.dead_letters()

    def dead_lettered(self, offsets: Iterable[int]) -> None:
        """The dead-letter topic acknowledged these records' copies: they are complete.
        Offsets owed nothing (done already, unknown) are ignored: a retry is harmless."""
        window, changed = self._window, False
        for offset in offsets:
            i = window.index(offset)
            if i is not None and window.states[i] == _ARCHIVED and window.reasons[i]:
                window.reasons[i] = DeadLetterReason.NONE
                self._below_done |= offset < self.start_offset
                changed = True
        if changed:
            self._changed()

    # --- rules ---------------------------------------------------------------------------

    def _refusal(self, member_id: str, batch: AcknowledgementBatch, now_ms: int) -> AckResult:
        first, last = batch.first_offset, batch.last_offset
        if first < 0 or last < first or batch.type not in _ACK_TYPES:
            return InvalidRequestError(f"bad acknowledgement batch {first}-{last} {batch.type}")
        window = self._window
        span = window.span(first, last)
        if not span:
            return InvalidRecordStateError(
                f"no record of offsets {first}-{last} is in flight", first_offset=first
            )
        for i in span:
            offset = window.offsets[i]
            if window.states[i] != _ACQUIRED or window.members[i] != member_id:
                state = RecordState(window.states[i]).name.lower()
                return InvalidRecordStateError(
                    f"offset {offset} is not acquired by member {member_id} ({state})",
                    offset=offset,
                )
            if window.deadlines[i] <= now_ms:
                return InvalidRecordStateError(
                    f"the lock on offset {offset} expired at {window.deadlines[i]} ms",
                    offset=offset,
                )
        return None

    def _apply(self, batch: AcknowledgementBatch, now_ms: int) -> None:
        window = self._window
        span = window.span(batch.first_offset, batch.last_offset)
        kind = batch.type
        if kind == AcknowledgeType.RENEW:
            for i in span:
                window.deadlines[i] = now_ms + self.settings.lock_duration_ms
            return
        for i in span:
            if kind == AcknowledgeType.ACCEPT:
                window.settle(i, _ACKNOWLEDGED, DeadLetterReason.NONE)
            elif kind == AcknowledgeType.REJECT:
                window.settle(i, _ARCHIVED, DeadLetterReason.REJECTED)
            else:
                self._release(i)
        self._below_done |= window.offsets[span.start] < self.start_offset

    def _release(self, i: int) -> None:
        """Unlock slot ``i``: available again, or archived at the delivery limit."""
        window = self._window
        if window.counts[i] >= self.settings.max_delivery_attempts:
            window.settle(i, _ARCHIVED, DeadLetterReason.MAX_DELIVERY_ATTEMPTS)
        else:
            window.settle(i, _AVAILABLE, DeadLetterReason.NONE)

    def _changed(self) -> None:
        self._advance()
        self.changes += 1

    def _advance(self) -> None:
        """Move SPSO over complete records and forget them (and complete ones below it)."""
        window = self._window
        i = window.lower_bound(self.start_offset)
        j, n = i, len(window)
        while j < n and window.is_complete(j):
            j += 1
        start = window.offsets[j] if j < n else self.scan_offset
        window.delete(i, j)
        if self._below_done:
            self._below_done = False
            for k in reversed(range(i)):
                if window.is_complete(k):
                    window.delete(k, k + 1)
        self.start_offset = start

    # --- snapshots and introspection -----------------------------------------------------

    def snapshot(self) -> ShareSnapshot:
        """The whole durable state (encode it with ``snapshot.encode_snapshot``)."""
        return ShareSnapshot(
            leader_epoch=self.leader_epoch,
            origin_offset=self.origin_offset,
            start_offset=self.start_offset,
            scan_offset=self.scan_offset,
            delay_watermark=self.delay_watermark,
            runs=tuple(self._window.runs()),
        )

    @classmethod
    def restore(
        cls, snapshot: ShareSnapshot, settings: ShareSettings, *, leader_epoch: int
    ) -> SharePartition:
        """The machine a leader of ``leader_epoch`` takes over from ``snapshot``. Available
        records at or past a (lowered) delivery limit are archived for the dead-letter topic.
        Raises ``FencedLeaderEpochError`` for a snapshot written by a later leader epoch."""
        if snapshot.leader_epoch > leader_epoch:
            raise FencedLeaderEpochError(
                f"the share state was written in leader epoch {snapshot.leader_epoch}, "
                f"after {leader_epoch}",
                leader_epoch=snapshot.leader_epoch,
            )
        machine = cls(settings, start_offset=snapshot.origin_offset, leader_epoch=leader_epoch)
        machine.start_offset = snapshot.start_offset
        machine.scan_offset = snapshot.scan_offset
        machine.delay_watermark = snapshot.delay_watermark
        window = machine._window
        for run in snapshot.runs:
            window.extend(run)
        for i in window.slots_in(_AVAILABLE):
            if window.counts[i] >= settings.max_delivery_attempts:
                window.settle(i, _ARCHIVED, DeadLetterReason.MAX_DELIVERY_ATTEMPTS)
        machine._deadline_floor = min(
            (window.deadlines[i] for i in window.slots_in(_ACQUIRED)), default=None
        )
        return machine

    @property
    def in_flight(self) -> int:
        return len(self._window)

    def record(self, offset: int) -> RecordView | None:
        """One record of the window, or None when it is not in flight."""
        i = self._window.index(offset)
        return None if i is None else self._window.view(i)

    def records(self) -> list[RecordView]:
        """Every record of the window, by offset."""
        return [self._window.view(i) for i in range(len(self._window))]

    def stats(self) -> ShareStats:
        return self._window.stats()
