"""SharePartition one rule at a time: reading the log, acquiring, acknowledging, lock expiry,
SPSO, member departure, introspection, the change counter (delays and dead letters:
``test_share_partition_delays.py``)."""

from __future__ import annotations

import re

import pytest

from tests.unit.broker.share.state.support import (
    ACCEPT,
    LOCK,
    REJECT,
    RELEASE,
    RENEW,
    SETTINGS,
    batch,
    filled,
    held,
    machine,
    records,
    states,
)
from yak.errors import InvalidRecordStateError, InvalidRequestError
from yak_broker.share.state.records import (
    AcknowledgeType,
    AcquiredRecord,
    DeadLetterReason,
    LogRange,
    LogRecord,
    ReadRequest,
    RecordState,
    ShareSettings,
)

# --- reading the log ---------------------------------------------------------------------


def test_a_new_share_partition_asks_for_log_from_its_start() -> None:
    m = machine(start=40)
    assert (m.start_offset, m.scan_offset, m.in_flight) == (40, 40, 0)
    assert m.read_request() == ReadRequest(40, SETTINGS.max_in_flight)
    assert m.acquire("a", 0, 5) == []


def test_admitted_records_become_available_and_the_scan_moves_to_where_the_read_ended() -> None:
    m = machine()
    assert m.admit(records([0, 1, 2]), next_offset=5) == 3  # 3 and 4: a control batch
    assert m.scan_offset == 5
    assert states(m) == dict.fromkeys((0, 1, 2), ("AVAILABLE", 0, None))
    assert m.read_request() is None  # records are available: no more log needed


def test_no_read_while_records_are_available_and_none_once_the_window_is_full() -> None:
    m = filled(range(10))
    assert m.read_request() is None
    m.acquire("a", 0, 10)
    assert m.read_request() is None  # 10 in flight: the window is full
    m.acknowledge("a", [batch(0, 3, ACCEPT)], 1)
    assert m.read_request() == ReadRequest(10, 4)


def test_acquire_through_takes_the_available_records_of_a_range_only() -> None:
    m = filled(range(8))
    assert [a.offset for a in m.acquire("a", 0, 2)] == [0, 1]
    assert [a.offset for a in m.acquire("b", 0, 1)] == [2]
    changes = m.changes
    got = m.acquire_through("a", 0, 2, 5)  # 2 is b's: skipped; 6 and 7 are past the range
    assert [(r.offset, r.delivery_count) for r in got] == [(3, 1), (4, 1), (5, 1)]
    assert m.changes == changes + 1
    assert sorted(held(m, "a")) == [0, 1, 3, 4, 5]
    assert m.acquire_through("a", 0, 3, 5) == []  # nothing available there any more
    assert m.changes == changes + 1


def test_a_full_window_stops_the_intake_at_the_first_record_not_taken() -> None:
    m = machine()
    assert m.admit(records(range(0, 30, 2)), next_offset=30) == 10
    assert m.scan_offset == 20  # offset 20 is read again later
    assert m.in_flight == 10


def test_a_stale_read_is_ignored_and_records_below_the_scan_are_skipped() -> None:
    m = filled([0, 1, 2])
    changes = m.changes
    assert m.admit(records([0, 1, 2]), next_offset=3) == 0
    assert m.changes == changes
    assert m.admit(records([1, 2, 3, 4]), next_offset=5) == 2
    assert sorted(states(m)) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("offsets", "next_offset"), [([3, 2], 5), ([1, 1], 5), ([1, 7], 5), ([5], 5)]
)
def test_records_out_of_order_or_past_the_read_end_are_a_driver_bug(
    offsets: list[int], next_offset: int
) -> None:
    with pytest.raises(ValueError, match="out of order or past"):
        machine().admit(records(offsets), next_offset)


def test_a_range_enters_as_its_records_would_clipped_to_the_scan_and_the_window() -> None:
    m = machine()  # SETTINGS: a window of 10
    assert m.admit([LogRange(0, 3, 7), LogRecord(4, 8)], next_offset=5) == 5
    assert states(m) == dict.fromkeys(range(5), ("AVAILABLE", 0, None))
    assert [v.timestamp_ms for v in m.records()] == [7, 7, 7, 7, 8]
    assert m.admit([LogRange(3, 12, 9)], next_offset=13) == 5  # 3-4 read again: skipped
    assert (m.scan_offset, m.in_flight) == (10, 10)  # full at 9: 10 is read again later
    m.acquire("a", 0, 10)
    m.acknowledge("a", [batch(0, 9, ACCEPT)], 1)
    assert m.admit([LogRange(10, 12, 9)], next_offset=13) == 3
    assert m.scan_offset == 13


@pytest.mark.parametrize(
    "ranges", [[LogRange(3, 2, 0)], [LogRange(0, 5, 0)], [LogRange(2, 3, 0), LogRange(3, 4, 0)]]
)
def test_ranges_out_of_order_or_past_the_read_end_are_a_driver_bug(ranges: list[LogRange]) -> None:
    with pytest.raises(ValueError, match="out of order or past"):
        machine().admit(ranges, next_offset=5)


def test_records_the_filter_rejected_are_done_at_once_and_never_delivered() -> None:
    m = machine()
    read = [LogRecord(0, 1), LogRecord(1, 1, accepted=False), LogRecord(2, 1, accepted=False)]
    assert m.admit(read, next_offset=3) == 1
    assert [r.offset for r in m.acquire("a", 0, 10)] == [0]
    m.acknowledge("a", [batch(0, 0, ACCEPT)], 1)
    assert (m.start_offset, m.in_flight) == (3, 0)


def test_an_empty_read_to_a_later_offset_moves_spso_over_the_gap() -> None:
    m = machine(start=5)
    m.admit([], next_offset=9)  # compacted away
    assert (m.start_offset, m.scan_offset) == (9, 9)


# --- acquiring -----------------------------------------------------------------------------


def test_acquire_locks_the_lowest_available_records_to_the_member() -> None:
    m = filled(range(5))
    got = m.acquire("a", now_ms=1_000, max_records=3)
    assert got == [AcquiredRecord(0, 1), AcquiredRecord(1, 1), AcquiredRecord(2, 1)]
    assert [m.acquire("b", 1_000, 3), held(m, "a")] == [
        [AcquiredRecord(3, 1), AcquiredRecord(4, 1)],
        [0, 1, 2],
    ]
    view = m.record(0)
    assert view is not None
    assert (view.state, view.member_id, view.deadline_ms) == (RecordState.ACQUIRED, "a", 2_000)
    assert m.next_deadline_ms == 2_000


def test_acquire_of_nothing_changes_nothing() -> None:
    m = filled(range(3))
    changes = m.changes
    assert m.acquire("a", 0, 0) == []
    assert m.changes == changes


@pytest.mark.parametrize(("member", "count"), [("", 1), ("a", -1)])
def test_acquire_refuses_a_bad_request(member: str, count: int) -> None:
    with pytest.raises(ValueError, match="bad acquisition"):
        filled([0]).acquire(member, 0, count)


def test_acquire_releases_expired_locks_first() -> None:
    m = filled(range(2))
    m.acquire("a", 0, 2)
    assert m.acquire("b", LOCK, 5) == [AcquiredRecord(0, 2), AcquiredRecord(1, 2)]
    assert held(m, "b") == [0, 1]


# --- acknowledging -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (ACCEPT, ("ACKNOWLEDGED", 1, None)),
        (RELEASE, ("AVAILABLE", 1, None)),
        (REJECT, ("ARCHIVED", 1, None)),
        (RENEW, ("ACQUIRED", 1, "a")),
    ],
)
def test_each_acknowledgement_type_moves_the_records_it_names(
    kind: AcknowledgeType, expected: tuple[str, int, str | None]
) -> None:
    m = filled(range(4))
    m.acquire("a", 0, 4)
    assert m.acknowledge("a", [batch(1, 2, kind)], 10) == [None]
    assert states(m)[1] == states(m)[2] == expected
    assert states(m)[0] == states(m)[3] == ("ACQUIRED", 1, "a")


def test_renew_extends_the_lock_from_now() -> None:
    m = filled([0])
    m.acquire("a", 0, 1)
    m.acknowledge("a", [batch(0, 0, RENEW)], 900)
    assert m.tick(LOCK) == 900 + LOCK  # not expired at the first deadline
    assert held(m, "a") == [0]


def test_reject_archives_for_the_dead_letter_topic() -> None:
    m = filled([0])
    m.acquire("a", 0, 1)
    m.acknowledge("a", [batch(0, 0, REJECT)], 1)
    view = m.record(0)
    assert view is not None
    assert (view.state, view.reason) == (RecordState.ARCHIVED, DeadLetterReason.REJECTED)
    assert m.start_offset == 0  # not complete until dead-lettered


def test_a_release_at_the_delivery_limit_archives_instead() -> None:
    m = filled([0])
    for attempt in range(1, 4):
        assert m.acquire("a", attempt, 1) == [AcquiredRecord(0, attempt)]
        m.acknowledge("a", [batch(0, 0, RELEASE)], attempt)
    view = m.record(0)
    assert view is not None
    assert (view.state, view.delivery_count) == (RecordState.ARCHIVED, 3)
    assert view.reason is DeadLetterReason.MAX_DELIVERY_ATTEMPTS
    assert m.acquire("a", 10, 1) == []


@pytest.mark.parametrize(
    ("member", "first", "last", "now", "error", "message"),
    [
        ("b", 0, 1, 10, InvalidRecordStateError, "not acquired by member b"),
        ("a", 0, 3, 10, InvalidRecordStateError, r"offset 2 is not acquired .*\(available\)"),
        ("a", 0, 1, LOCK, InvalidRecordStateError, "expired at 1000"),
        ("a", 7, 9, 10, InvalidRecordStateError, "no record of offsets 7-9"),
        ("a", 1, 0, 10, InvalidRequestError, "bad acknowledgement batch 1-0"),
        ("a", -1, 0, 10, InvalidRequestError, "bad acknowledgement batch -1-0"),
    ],
)
def test_a_refused_batch_changes_nothing(
    member: str, first: int, last: int, now: int, error: type[Exception], message: str
) -> None:
    m = filled(range(3))
    m.acquire("a", 0, 2)
    before, changes = states(m), m.changes
    (result,) = m.acknowledge(member, [batch(first, last, ACCEPT)], now)
    assert isinstance(result, error)
    assert re.search(message, str(result))
    assert states(m) == before
    assert m.changes == changes


def test_an_unknown_acknowledgement_type_is_a_bad_request() -> None:
    m = filled([0])
    m.acquire("a", 0, 1)
    (result,) = m.acknowledge("a", [batch(0, 0, 9)], 1)  # type: ignore[arg-type]
    assert isinstance(result, InvalidRequestError)


def test_batches_are_applied_each_whole_or_not_at_all() -> None:
    m = filled(range(6))
    m.acquire("a", 0, 4)
    results = m.acknowledge(
        "a", [batch(0, 1, ACCEPT), batch(3, 5, ACCEPT), batch(2, 2, REJECT), batch(1, 1, RENEW)], 1
    )
    assert [type(r).__name__ if r else None for r in results] == [
        None,
        "InvalidRecordStateError",  # 4 and 5 are not acquired: 3 stays acquired
        None,
        "InvalidRecordStateError",  # 1 was accepted by the first batch
    ]
    assert states(m)[3] == ("ACQUIRED", 1, "a")
    assert states(m)[2] == ("ARCHIVED", 1, None)


def test_ranges_may_span_offsets_absent_from_the_log() -> None:
    m = filled([0, 3, 7], next_offset=10)
    m.acquire("a", 0, 3)
    assert m.acknowledge("a", [batch(0, 9, ACCEPT)], 1) == [None]
    assert (m.start_offset, m.in_flight) == (10, 0)


# --- lock expiry ---------------------------------------------------------------------------


def test_tick_releases_expired_locks_and_reports_the_next_deadline() -> None:
    m = filled(range(3))
    m.acquire("a", 0, 1)
    m.acquire("b", 500, 1)
    assert m.tick(999) == LOCK
    assert m.expired_locks == 0
    assert m.tick(LOCK) == 500 + LOCK
    assert m.expired_locks == 1
    assert states(m)[0] == ("AVAILABLE", 1, None)
    assert states(m)[1] == ("ACQUIRED", 1, "b")
    assert m.tick(1_500) is None
    assert m.expired_locks == 2
    assert m.next_deadline_ms is None


def test_an_expired_lock_at_the_delivery_limit_archives_the_record() -> None:
    m = filled([0])
    for attempt in range(3):
        m.acquire("a", attempt * LOCK, 1)
    m.tick(3 * LOCK)
    assert states(m) == {0: ("ARCHIVED", 3, None)}
    (pending,) = m.dead_letter_pending()
    assert (pending.offset, pending.delivery_count, pending.reason.text) == (
        0,
        3,
        "max delivery attempts",
    )


def test_a_tick_with_nothing_due_changes_nothing() -> None:
    m = filled([0])
    m.acquire("a", 0, 1)
    changes = m.changes
    assert m.tick(10) == LOCK
    assert m.changes == changes


# --- SPSO and members ------------------------------------------------------------------------


def test_spso_moves_over_complete_records_and_forgets_them() -> None:
    m = filled(range(5))
    m.acquire("a", 0, 5)
    m.acknowledge("a", [batch(1, 2, ACCEPT)], 1)
    assert (m.start_offset, m.in_flight) == (0, 5)  # 0 is still acquired
    m.acknowledge("a", [batch(0, 0, ACCEPT)], 1)
    assert (m.start_offset, m.in_flight) == (3, 2)
    m.acknowledge("a", [batch(3, 4, ACCEPT)], 1)
    assert (m.start_offset, m.in_flight) == (5, 0)
    assert m.read_request() == ReadRequest(5, 10)


def test_a_departed_members_records_are_offered_again() -> None:
    m = filled(range(4))
    m.acquire("a", 0, 2)
    m.acquire("b", 0, 1)
    assert m.release_member("a") == 2
    assert m.release_member("nobody") == 0
    assert m.acquire("c", 1, 10) == [AcquiredRecord(0, 2), AcquiredRecord(1, 2), (3, 1)]


# --- introspection and changes ---------------------------------------------------------------


def test_stats_count_the_window_by_state_and_member() -> None:
    m = filled(range(8))
    m.acquire("a", 0, 3)
    m.acquire("b", 0, 3)
    m.acknowledge("a", [batch(1, 1, ACCEPT), batch(2, 2, REJECT)], 1)
    m.acknowledge("b", [batch(3, 3, REJECT)], 1)
    m.dead_lettered([3])
    stats = m.stats()
    assert stats.available == 2
    assert stats.acquired == 3
    assert stats.acknowledged == 1
    assert (stats.archived, stats.dead_letter_pending) == (2, 1)
    assert stats.in_flight == 8
    assert stats.oldest_unacked_timestamp_ms == 100  # offset 0, acquired
    assert stats.acquired_by_member == {"a": 1, "b": 2}


def test_stats_of_an_empty_window() -> None:
    stats = machine().stats()
    assert (stats.in_flight, stats.oldest_unacked_timestamp_ms) == (0, None)


def test_every_change_of_durable_state_moves_the_change_counter() -> None:
    m = machine()
    seen = [m.changes]
    m.admit(records(range(3)), 3)
    seen.append(m.changes)
    m.acquire("a", 0, 2)
    seen.append(m.changes)
    m.acknowledge("a", [batch(0, 0, RENEW)], 1)
    seen.append(m.changes)
    m.tick(LOCK + 10)
    seen.append(m.changes)
    assert seen == sorted(set(seen))  # strictly increasing


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="lock duration"):
        ShareSettings(lock_duration_ms=0)
    with pytest.raises(ValueError, match="max delivery attempts"):
        ShareSettings(max_delivery_attempts=256)
    with pytest.raises(ValueError, match="max in flight"):
        ShareSettings(max_in_flight=0)
    with pytest.raises(ValueError, match="start offset"):
        machine(start=-1)
    assert ShareSettings() == ShareSettings(30_000, 5, 2_000)
