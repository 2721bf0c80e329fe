"""InFlightWindow: the parallel arrays stay aligned through appends, inserts, deletes and runs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from yak_broker.share.state.records import DeadLetterReason, RecordState, Run
from yak_broker.share.state.window import InFlightWindow

_A = RecordState.AVAILABLE
_Q = RecordState.ACQUIRED


def window(*offsets: int) -> InFlightWindow:
    w = InFlightWindow()
    for offset in offsets:
        w.append(offset, _A, 1_000 + offset)
    return w


def test_offsets_are_found_by_bisection() -> None:
    w = window(2, 3, 7)
    assert [w.index(o) for o in (1, 2, 3, 5, 7, 8)] == [None, 0, 1, None, 2, None]
    assert list(w.span(3, 6)) == [1]
    assert list(w.span(0, 100)) == [0, 1, 2]
    assert not w.span(4, 6)
    assert w.lower_bound(4) == 2


def test_inserts_keep_every_column_aligned() -> None:
    w = window(2, 7)
    assert w.insert(5, _A, 42) == 1
    w.acquire(1, "m", 900)
    assert [v.offset for v in map(w.view, range(3))] == [2, 5, 7]
    assert w.view(1) == (5, _Q, 1, "m", 900, DeadLetterReason.NONE, 42)
    w.delete(0, 1)
    assert w.view(0).offset == 5
    assert len(w) == 2


def test_acquire_span_is_acquire_on_every_slot_of_the_span() -> None:
    spans, single = window(*range(6)), window(*range(6))
    for w in (spans, single):
        w.acquire(1, "first", 500)
        w.settle(1, _A, DeadLetterReason.NONE)  # delivered once, offered again
    spans.acquire_span(1, 4, "m", 900)
    for i in range(1, 4):
        single.acquire(i, "m", 900)
    assert [spans.view(i) for i in range(6)] == [single.view(i) for i in range(6)]
    assert spans.view(1).delivery_count == 2
    assert spans.view(2) == (2, _Q, 1, "m", 900, DeadLetterReason.NONE, 1_002)
    assert spans.available_end(0) == 1
    assert spans.available_end(4) == 6


def test_an_offset_is_added_once_and_appends_go_forward() -> None:
    w = window(2, 7)
    with pytest.raises(ValueError, match="in the window already"):
        w.insert(7, _A, 0)
    with pytest.raises(ValueError, match="not past the window's last 7"):
        w.append(7, _A, 0)
    with pytest.raises(ValueError, match="overlaps"):
        w.extend(Run(7, 8, _A, 0, None, 0, DeadLetterReason.NONE, 0))


def test_slots_in_a_state_may_change_state_while_iterated() -> None:
    w = window(0, 1, 2, 3)
    for i in w.slots_in(_A):
        if i % 2 == 0:
            w.acquire(i, "m", 1)
    assert list(w.slots_in(_Q)) == [0, 2]
    assert list(w.slots_in(_A, start=2)) == [3]
    assert (w.count(_A), w.count(_Q)) == (2, 2)


def test_runs_group_consecutive_equal_records_and_extend_restores_them() -> None:
    w = window(0, 1, 2, 4, 5)
    w.acquire(2, "m", 9)
    runs = list(w.runs())
    assert [(r.first_offset, r.last_offset, r.state, r.timestamp_ms) for r in runs] == [
        (0, 1, _A, 1_000),
        (2, 2, _Q, 1_002),
        (4, 5, _A, 1_004),  # the gap at 3 splits equal records
    ]
    copy = InFlightWindow()
    for run in runs:
        copy.extend(run)
    assert list(copy.runs()) == runs
    assert copy.members[2] is w.members[2]  # interned: one string per member


def _reference_runs(window: InFlightWindow) -> list[Run]:
    """Runs computed the plain way: slot by slot, a new run wherever an offset is not the
    previous one + 1 or any attribute but the timestamp differs."""
    out: list[Run] = []
    for i in range(len(window)):
        view = window.view(i)
        last = out[-1] if out else None
        same = last is not None and (
            last.last_offset + 1 == view.offset
            and (last.state, last.delivery_count, last.member_id, last.deadline_ms, last.reason)
            == (view.state, view.delivery_count, view.member_id, view.deadline_ms, view.reason)
        )
        if last is not None and same:
            out[-1] = last._replace(
                last_offset=view.offset, timestamp_ms=min(last.timestamp_ms, view.timestamp_ms)
            )
        else:
            out.append(
                Run(
                    view.offset, view.offset, view.state, view.delivery_count, view.member_id,
                    view.deadline_ms, view.reason, view.timestamp_ms,
                )
            )  # fmt: skip
    return out


_FATES = [
    RecordState.AVAILABLE,
    RecordState.ACQUIRED,
    RecordState.ACKNOWLEDGED,
    RecordState.ARCHIVED,
]


@given(
    st.lists(
        st.tuples(
            st.integers(1, 3),  # gap to the previous offset
            st.integers(0, 2),  # deliveries before its fate
            st.sampled_from(_FATES),
            st.sampled_from(["a", "b"]),
            st.sampled_from([1_000, 2_000]),  # lock deadline
            st.sampled_from([DeadLetterReason.NONE, DeadLetterReason.REJECTED]),
            st.integers(0, 2),  # timestamp
        ),
        max_size=80,
    )
)
def test_runs_are_the_plain_slot_by_slot_runs(
    slots: list[tuple[int, int, RecordState, str, int, DeadLetterReason, int]],
) -> None:
    window, offset = InFlightWindow(), 0
    for gap, deliveries, fate, member, deadline, reason, timestamp in slots:
        offset += gap
        i = window.insert(offset, RecordState.AVAILABLE, timestamp)
        for _ in range(deliveries):
            window.acquire(i, member, deadline)
            window.settle(i, RecordState.AVAILABLE, DeadLetterReason.NONE)
        if fate == RecordState.ACQUIRED:
            window.acquire(i, member, deadline)
        elif fate == RecordState.ARCHIVED:
            window.settle(i, fate, reason)
        elif fate == RecordState.ACKNOWLEDGED:
            window.settle(i, fate, DeadLetterReason.NONE)
    assert list(window.runs()) == _reference_runs(window)


def test_long_runs_end_where_a_byte_changes_or_the_offsets_jump() -> None:
    window = InFlightWindow()
    for offset in [*range(50), *range(60, 90), *range(90, 110), *range(110, 150)]:
        i = window.insert(offset, RecordState.AVAILABLE, offset)
        if 90 <= offset < 110:  # delivered once and released: count 1
            window.acquire(i, "a", 1)
            window.settle(i, RecordState.AVAILABLE, DeadLetterReason.NONE)
        elif offset >= 110:
            window.settle(i, RecordState.ACKNOWLEDGED, DeadLetterReason.NONE)
    runs = list(window.runs())
    assert runs == _reference_runs(window)
    assert [(r.first_offset, r.last_offset) for r in runs] == [
        (0, 49), (60, 89), (90, 109), (110, 149),
    ]  # fmt: skip
    assert [r.timestamp_ms for r in runs] == [0, 60, 90, 110]
