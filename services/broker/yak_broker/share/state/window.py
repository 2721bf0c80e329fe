"""``InFlightWindow``: the in-flight records of one share-partition, as parallel arrays.

One slot per record, in offset order: ``offsets`` (``array('q')``, strictly increasing),
``states``, ``counts`` and ``reasons`` (one byte each), ``deadlines`` and ``timestamps``
(``array('q')``) and ``members`` (a list of interned member-id strings, None when not
acquired). A few thousand records cost ~40 bytes each and no object per record; finding the
next available or acquired record is ``bytearray.find`` (C speed), an offset is found by
bisection. Offsets may be sparse (compacted topics, delayed records that left the window).

This module keeps the arrays consistent and answers reads over them (views, runs, counts);
``SharePartition`` decides every transition. Not thread-safe; one owner.
"""

from __future__ import annotations

import re
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterator

from yak_broker.share.state.records import (
    DeadLetter,
    DeadLetterReason,
    RecordState,
    RecordView,
    Run,
    ShareStats,
)

__all__ = ["InFlightWindow"]

_ACQUIRED = RecordState.ACQUIRED
_ACKNOWLEDGED = RecordState.ACKNOWLEDGED
_ARCHIVED = RecordState.ARCHIVED
#: The enums by value: a dict lookup, where calling an Enum class is a slow path.
_STATES = {s.value: s for s in RecordState}
_REASONS = {r.value: r for r in DeadLetterReason}


class InFlightWindow:
    """See the module doc. Indices are positions in offset order; they shift on insert/delete."""

    __slots__ = ("counts", "deadlines", "members", "offsets", "reasons", "states", "timestamps")

    def __init__(self) -> None:
        self.offsets = array("q")
        self.states = bytearray()
        self.counts = bytearray()
        self.reasons = bytearray()
        self.deadlines = array("q")
        self.timestamps = array("q")
        self.members: list[str | None] = []

    def __len__(self) -> int:
        return len(self.offsets)

    # --- finding -------------------------------------------------------------------------

    def index(self, offset: int) -> int | None:
        """The slot of ``offset``, or None when it is not in the window."""
        i = bisect_left(self.offsets, offset)
        return i if i < len(self.offsets) and self.offsets[i] == offset else None

    def lower_bound(self, offset: int) -> int:
        """The first slot whose offset is at or above ``offset``."""
        return bisect_left(self.offsets, offset)

    def span(self, first: int, last: int) -> range:
        """The slots whose offsets lie in ``[first, last]``."""
        return range(bisect_left(self.offsets, first), bisect_right(self.offsets, last))

    def slots_in(self, state: RecordState, start: int = 0) -> Iterator[int]:
        """The slots in ``state``, in offset order, from slot ``start`` (do not insert or delete
        while iterating; changing a slot's state is fine)."""
        states, byte = self.states, state.value
        i = states.find(byte, start)
        while i >= 0:
            yield i
            i = states.find(byte, i + 1)

    def count(self, state: RecordState) -> int:
        return self.states.count(state.value)

    def is_complete(self, i: int) -> bool:
        """Acknowledged, or archived with no dead-letter copy pending."""
        state = self.states[i]
        return state == _ACKNOWLEDGED or (state == _ARCHIVED and self.reasons[i] == 0)

    def view(self, i: int) -> RecordView:
        return RecordView(
            self.offsets[i],
            RecordState(self.states[i]),
            self.counts[i],
            self.members[i],
            self.deadlines[i],
            DeadLetterReason(self.reasons[i]),
            self.timestamps[i],
        )

    def dead_letters(self) -> list[DeadLetter]:
        """Archived records with a dead-letter reason, by offset."""
        out = []
        for i in self.slots_in(_ARCHIVED):
            if self.reasons[i]:
                reason = DeadLetterReason(self.reasons[i])
                out.append(DeadLetter(self.offsets[i], self.counts[i], reason, self.timestamps[i]))
        return out

    def stats(self) -> ShareStats:
        acquired = list(self.slots_in(_ACQUIRED))
        unacked = [*acquired, *self.slots_in(RecordState.AVAILABLE)]
        archived = list(self.slots_in(_ARCHIVED))
        return ShareStats(
            available=len(unacked) - len(acquired),
            acquired=len(acquired),
            acknowledged=self.count(_ACKNOWLEDGED),
            archived=len(archived),
            dead_letter_pending=sum(1 for i in archived if self.reasons[i]),
            in_flight=len(self.offsets),
            oldest_unacked_timestamp_ms=min((self.timestamps[i] for i in unacked), default=None),
            acquired_by_member=dict(Counter(self.members[i] or "" for i in acquired)),
        )

    # --- changing ------------------------------------------------------------------------

    def append(self, offset: int, state: RecordState, timestamp_ms: int) -> None:
        """A new record past every offset in the window, never delivered."""
        if self.offsets and offset <= self.offsets[-1]:
            raise ValueError(f"offset {offset} is not past the window's last {self.offsets[-1]}")
        self._put(len(self.offsets), offset, state, timestamp_ms)

    def insert(self, offset: int, state: RecordState, timestamp_ms: int) -> int:
        """A new record anywhere (a delayed record come due); returns its slot."""
        i = bisect_left(self.offsets, offset)
        if i < len(self.offsets) and self.offsets[i] == offset:
            raise ValueError(f"offset {offset} is in the window already")
        self._put(i, offset, state, timestamp_ms)
        return i

    def _put(self, i: int, offset: int, state: RecordState, timestamp_ms: int) -> None:
        self.offsets.insert(i, offset)
        self.states.insert(i, state)
        self.counts.insert(i, 0)
        self.reasons.insert(i, 0)
        self.deadlines.insert(i, 0)
        self.timestamps.insert(i, timestamp_ms)
        self.members.insert(i, None)

    def acquire(self, i: int, member_id: str, deadline_ms: int) -> int:
        """Lock slot ``i`` to ``member_id``; returns its new delivery count."""
        self.states[i] = _ACQUIRED
        self.members[i] = sys.intern(member_id)
        self.deadlines[i] = deadline_ms
        self.counts[i] += 1
        return self.counts[i]

    def acquire_span(self, start: int, stop: int, member_id: str, deadline_ms: int) -> None:
        """``acquire`` every slot of ``[start, stop)`` at C speed (slice writes; the counts
        rise by one through a translation table)."""
        size = stop - start
        self.states[start:stop] = _ACQUIRED_BYTE * size
        member = sys.intern(member_id)
        self.members[start:stop] = [member] * size
        self.deadlines[start:stop] = array("q", (deadline_ms,)) * size
        self.counts[start:stop] = self.counts[start:stop].translate(_PLUS_ONE)

    def available_end(self, start: int) -> int:
        """The first slot at or after ``start`` that is not available (len: none)."""
        return _differs(self.states, RecordState.AVAILABLE, start)

    def settle(self, i: int, state: RecordState, reason: DeadLetterReason) -> None:
        """Set slot ``i`` to an unlocked state (available, acknowledged or archived)."""
        self.states[i] = state
        self.reasons[i] = reason
        self.members[i] = None
        self.deadlines[i] = 0

    def delete(self, start: int, stop: int) -> None:
        """Forget the slots ``[start, stop)``."""
        for column in (
            self.offsets,
            self.states,
            self.counts,
            self.reasons,
            self.deadlines,
            self.timestamps,
            self.members,
        ):
            del column[start:stop]

    # --- runs ----------------------------------------------------------------------------

    def runs(self) -> Iterator[Run]:
        """The window as runs of consecutive offsets sharing every attribute but the
        timestamp (each run carries its oldest). A snapshot walks the whole window, so a run
        of unlocked records — most of a window: the available tail, acknowledged stretches —
        is found at C speed once it is longer than ``_SHORT_RUN``: where its state, count and
        reason bytes end (``_differs``; an unlocked slot has no member and no deadline) and
        where its offsets stop being consecutive (``offset - slot`` is non-decreasing:
        bisection). Short runs and acquired records (few: what members hold) are compared
        slot by slot."""
        offsets, timestamps = self.offsets, self.timestamps
        states, counts, reasons, members, deadlines = (
            self.states, self.counts, self.reasons, self.members, self.deadlines,
        )  # fmt: skip
        n = len(offsets)
        i = 0
        while i < n:
            state, count, reason = states[i], counts[i], reasons[i]
            base = offsets[i] - i
            if state != _ACQUIRED:
                member, deadline = None, 0
                j, short = i + 1, min(i + _SHORT_RUN, n)
                while (
                    j < short
                    and states[j] == state
                    and counts[j] == count
                    and reasons[j] == reason
                    and offsets[j] - j == base
                ):
                    j += 1
                if j == short < n:  # a long run: find its end at C speed
                    j = min(_differs(states, state, j), _differs(counts, count, j))
                    j = min(j, _differs(reasons, reason, j))
                    if offsets[j - 1] - (j - 1) != base:
                        j = _gap(offsets, base, i, j)
            else:
                member, deadline = members[i], deadlines[i]
                j = i + 1
                while (
                    j < n
                    and states[j] == state
                    and members[j] == member
                    and deadlines[j] == deadline
                    and counts[j] == count
                    and offsets[j] - j == base
                ):
                    j += 1
            yield Run(
                offsets[i],
                offsets[j - 1],
                _STATES[state],
                count,
                member,
                deadline,
                _REASONS[reason],
                min(timestamps[i:j]),
            )
            i = j

    def extend(self, run: Run) -> None:
        """Append every record of ``run`` (past the window's last offset)."""
        if self.offsets and run.first_offset <= self.offsets[-1]:
            raise ValueError(f"run at {run.first_offset} overlaps the window")
        length = run.last_offset - run.first_offset + 1
        member = sys.intern(run.member_id) if run.member_id is not None else None
        self.offsets.extend(range(run.first_offset, run.last_offset + 1))
        self.states.extend(bytes([run.state]) * length)
        self.counts.extend(bytes([run.delivery_count]) * length)
        self.reasons.extend(bytes([run.reason]) * length)
        self.deadlines.extend([run.deadline_ms] * length)
        self.timestamps.extend([run.timestamp_ms] * length)
        self.members.extend([member] * length)


_ACQUIRED_BYTE = bytes((RecordState.ACQUIRED,))
#: Each delivery count one higher (255 stays: counts stop far below, at the delivery limit).
_PLUS_ONE = bytes(min(v + 1, 255) for v in range(256))
#: Slots compared one by one before a run of unlocked records is taken for a long one.
_SHORT_RUN = 8
#: Per byte value, a pattern matching any other byte (``_differs``).
_OTHER_BYTE = [re.compile(b"[^" + re.escape(bytes([v])) + b"]") for v in range(256)]


def _differs(column: bytearray, value: int, start: int) -> int:
    """The first slot at or after ``start`` whose byte is not ``value`` (len: none)."""
    found = _OTHER_BYTE[value].search(column, start)
    return found.start() if found is not None else len(column)


def _gap(offsets: array[int], base: int, start: int, stop: int) -> int:
    """The first slot in ``(start, stop)`` whose ``offset - slot`` passed ``base`` (offsets
    strictly increase, so ``offset - slot`` never decreases); ``stop`` if none."""
    low, high = start + 1, stop
    while low < high:
        middle = (low + high) // 2
        if offsets[middle] - middle > base:
            high = middle
        else:
            low = middle + 1
    return low
