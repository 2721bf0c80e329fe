"""SharePartition's delayed records (the delay watermark, ``admit`` skipping, ``inject_due``),
its dead-letter hand-off and its restore from a snapshot (a new leader)."""

from __future__ import annotations

import pytest

from tests.unit.broker.share.state.support import (
    ACCEPT,
    LOCK,
    REJECT,
    SETTINGS,
    batch,
    filled,
    held,
    machine,
    round_trip,
    states,
)
from yak.errors import FencedLeaderEpochError
from yak_broker.share.state.records import (
    MAX_OFFSET,
    AcquiredRecord,
    DeadLetter,
    DeadLetterReason,
    DelayWatermark,
    DueEntry,
    LogRecord,
    ShareSettings,
)
from yak_broker.share.state.share_partition import SharePartition


def delayed_log() -> SharePartition:
    """Offsets 0-4 read; 1 due at 5,000 and 3 due at 9,000; the watermark at 1,000."""
    m = SharePartition(SETTINGS, start_offset=0, delay_watermark=DelayWatermark(1_000))
    read = [
        LogRecord(0, 10),
        LogRecord(1, 11, deliver_at_ms=5_000),
        LogRecord(2, 12),
        LogRecord(3, 13, deliver_at_ms=9_000),
        LogRecord(4, 14, deliver_at_ms=900),  # due before the watermark: enters now
    ]
    m.admit(read, next_offset=5)
    return m


def test_a_record_due_after_the_watermark_is_skipped_and_does_not_hold_spso() -> None:
    m = delayed_log()
    assert sorted(states(m)) == [0, 2, 4]
    m.acquire("a", 0, 10)
    m.acknowledge("a", [batch(0, 4, ACCEPT)], 1)
    assert (m.start_offset, m.in_flight) == (5, 0)


def test_due_entries_enter_below_spso_as_available_and_are_dropped_once_complete() -> None:
    m = delayed_log()
    m.acquire("a", 0, 10)
    m.acknowledge("a", [batch(0, 4, ACCEPT)], 1)
    mark = m.inject_due([DueEntry(1, 5_000), DueEntry(3, 9_000)], through_ms=6_000)
    assert mark == DelayWatermark(6_000, MAX_OFFSET)
    assert states(m) == {1: ("AVAILABLE", 0, None)}  # 3 is not due by 6,000
    (view,) = m.records()
    assert view.timestamp_ms == 5_000  # its age counts from when it came due
    assert m.acquire("a", 6_000, 10) == [AcquiredRecord(1, 1)]
    m.acknowledge("a", [batch(1, 1, ACCEPT)], 6_001)
    assert (m.start_offset, m.in_flight) == (5, 0)


def test_injection_is_idempotent() -> None:
    m = delayed_log()
    m.inject_due([DueEntry(1, 5_000)], through_ms=6_000)
    assert [r.offset for r in m.acquire("a", 6_000, 10)] == [0, 1, 2, 4]
    m.acknowledge("a", [batch(0, 4, ACCEPT)], 6_001)
    changes = m.changes
    assert m.inject_due([DueEntry(1, 5_000)], through_ms=6_000) == DelayWatermark(6_000)
    assert m.inject_due([DueEntry(1, 5_000)], through_ms=7_000) == DelayWatermark(7_000)
    assert m.in_flight == 0
    assert m.changes == changes + 1  # the watermark moved; nothing entered


def test_entries_at_or_past_the_scan_are_left_to_admit_and_below_origin_ignored() -> None:
    m = machine(start=10)
    m.admit([LogRecord(10, 1)], next_offset=11)
    mark = m.inject_due([DueEntry(5, 50), DueEntry(12, 60)], through_ms=100)
    assert mark == DelayWatermark(100)
    assert sorted(states(m)) == [10]
    # 12 is read later: due before the watermark, it enters through admit
    m.admit([LogRecord(11, 1), LogRecord(12, 1, deliver_at_ms=60)], next_offset=13)
    assert sorted(states(m)) == [10, 11, 12]


def test_a_full_window_stops_injection_at_an_exact_watermark() -> None:
    m = SharePartition(ShareSettings(max_in_flight=3), start_offset=0)
    m.admit([LogRecord(o, 1, deliver_at_ms=100) for o in range(5)], next_offset=5)
    assert m.in_flight == 0
    due = [DueEntry(o, 100) for o in reversed(range(5))]  # any order
    assert m.inject_due(due, through_ms=200) == DelayWatermark(100, 2)
    assert sorted(states(m)) == [0, 1, 2]
    m.acquire("a", 200, 3)
    m.acknowledge("a", [batch(0, 2, ACCEPT)], 201)
    assert m.inject_due(due, through_ms=200) == DelayWatermark(200)
    assert sorted(states(m)) == [3, 4]


def test_the_watermark_never_goes_back() -> None:
    m = machine()
    m.inject_due([], through_ms=500)
    changes = m.changes
    assert m.inject_due([DueEntry(0, 100)], through_ms=400) == DelayWatermark(500)
    assert m.changes == changes


# --- dead letters ----------------------------------------------------------------------------


def test_dead_letters_stay_pending_until_the_driver_says_they_are_copied() -> None:
    m = filled(range(3))
    m.acquire("a", 0, 3)
    m.acknowledge("a", [batch(0, 1, REJECT), batch(2, 2, ACCEPT)], 1)
    assert m.dead_letter_pending() == [
        DeadLetter(0, 1, DeadLetterReason.REJECTED, 100),
        DeadLetter(1, 1, DeadLetterReason.REJECTED, 101),
    ]
    assert m.start_offset == 0
    m.dead_lettered([1, 2, 99])  # 2 and 99 owe nothing: ignored
    assert [d.offset for d in m.dead_letter_pending()] == [0]
    assert m.start_offset == 0
    changes = m.changes
    m.dead_lettered([1])  # a retry changes nothing
    assert m.changes == changes
    m.dead_lettered([0])
    assert (m.start_offset, m.in_flight, m.dead_letter_pending()) == (3, 0, [])


def test_a_dead_letter_below_spso_is_dropped_once_copied() -> None:
    m = delayed_log()
    m.acquire("a", 0, 10)
    m.acknowledge("a", [batch(0, 4, ACCEPT)], 1)
    m.inject_due([DueEntry(1, 5_000)], through_ms=5_000)
    m.acquire("a", 5_000, 1)
    m.acknowledge("a", [batch(1, 1, REJECT)], 5_001)
    assert [d.offset for d in m.dead_letter_pending()] == [1]
    m.dead_lettered([1])
    assert (m.start_offset, m.in_flight) == (5, 0)


# --- restore (a new leader) ------------------------------------------------------------------


def test_a_new_leader_keeps_acquired_records_with_their_member_and_deadline() -> None:
    m = filled(range(6))
    m.acquire("a", 0, 2)
    m.acquire("b", 300, 2)
    m.acknowledge("b", [batch(2, 2, REJECT)], 301)
    restored = round_trip(m, leader_epoch=4)
    assert restored.leader_epoch == 4
    assert states(restored) == states(m)
    assert restored.next_deadline_ms == LOCK
    assert restored.acknowledge("a", [batch(0, 1, ACCEPT)], 500) == [None]
    assert restored.tick(300 + LOCK) is None
    assert held(restored, "b") == []
    assert [d.offset for d in restored.dead_letter_pending()] == [2]
    assert restored.acquire("c", 2_000, 10) == [(3, 2), (4, 1), (5, 1)]
    assert restored.changes > 0


def test_a_snapshot_of_a_later_leader_epoch_is_refused() -> None:
    m = SharePartition(SETTINGS, start_offset=0, leader_epoch=7)
    with pytest.raises(FencedLeaderEpochError, match="leader epoch 7, after 6"):
        round_trip(m, leader_epoch=6)


def test_a_lowered_delivery_limit_archives_available_records_at_it() -> None:
    m = filled(range(2))
    for now in (0, LOCK, 2 * LOCK):
        m.acquire("a", now, 1)
    m.tick(3 * LOCK)
    m.acquire("a", 3 * LOCK, 2)
    m.tick(4 * LOCK)  # offset 0 archived at 3; offset 1 available with 1 delivery
    lowered = ShareSettings(lock_duration_ms=LOCK, max_delivery_attempts=1, max_in_flight=10)
    restored = SharePartition.restore(m.snapshot(), lowered, leader_epoch=0)
    assert states(restored) == {0: ("ARCHIVED", 3, None), 1: ("ARCHIVED", 1, None)}
    assert [d.reason for d in restored.dead_letter_pending()] == [
        DeadLetterReason.MAX_DELIVERY_ATTEMPTS
    ] * 2
