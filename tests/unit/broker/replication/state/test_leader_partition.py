"""LeaderPartition one rule at a time, on a real log (scenario tables)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.broker.replication.support import LAG, append, epochs_of, make_log, state
from yak.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from yak.metadata.models import PartitionState
from yak_broker.replication.state.fetch_metadata import SessionClock
from yak_broker.replication.state.leader_partition import LeaderPartition
from yak_broker.replication.state.messages import (
    FENCED_LEADER_EPOCH,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_LEADER_EPOCH,
    AlterIsr,
    EpochAnswer,
    EpochQuery,
    HighWatermarkAdvanced,
)
from yak_broker.storage.log import Log


@pytest.fixture
def log(tmp_path: Path) -> Log:
    return make_log(tmp_path)


def lead(log: Log, now_ms: int = 0, **changes: object) -> LeaderPartition:
    return LeaderPartition(0, state(**changes), log, now_ms=now_ms, replica_lag_time_max_ms=LAG)


def test_becoming_leader_stamps_the_epoch_at_the_log_end(log: Log) -> None:
    append(log, 0, b"a", b"b")
    leader = lead(log)
    assert epochs_of(log) == [(0, 0), (1, 2)]
    assert leader.epoch_start_offset == 2
    assert log.end_offset_for_epoch(0) == (0, 2)  # epoch 0 ends where epoch 1 starts
    append(log, 1, b"c")
    again = lead(log)  # the same epoch again (a restart before the lease expired)
    assert epochs_of(log) == [(0, 0), (1, 2)]
    assert again.epoch_start_offset == 3  # at the latest: only stricter for ISR expansion


def test_only_the_named_leader_may_create_the_machine(log: Log) -> None:
    with pytest.raises(ValueError, match="does not lead"):
        LeaderPartition(1, state(), log, now_ms=0, replica_lag_time_max_ms=LAG)


@pytest.mark.parametrize(
    ("previous", "fetch_offset", "leader_leo", "now", "caught_up_ms"),
    [
        # previous: (leader LEO at the previous fetch, its time) or None for a first fetch
        (None, 3, 3, 500, 500),  # at the leader's LEO: caught up now
        (None, 2, 3, 500, 0),  # behind on a first fetch: still the creation time
        ((2, 400), 2, 3, 500, 400),  # reached the LEO of its previous fetch: as of then
        ((3, 400), 2, 3, 500, 0),  # behind the LEO of its previous fetch too: unchanged
        ((2, 400), 3, 3, 500, 500),
    ],
)
def test_caught_up_rule(
    log: Log,
    previous: tuple[int, int] | None,
    fetch_offset: int,
    leader_leo: int,
    now: int,
    caught_up_ms: int,
) -> None:
    leader = lead(log)
    if previous is not None:
        append(log, 1, *[b"x"] * previous[0])
        leader.on_follower_fetch(1, 0, previous[1])
    append(log, 1, *[b"x"] * (leader_leo - log.log_end_offset))
    leader.on_follower_fetch(1, fetch_offset, now)
    assert leader.followers[1].last_caught_up_ms == caught_up_ms


def test_a_fetch_beyond_the_leader_log_end_counts_for_nothing(log: Log) -> None:
    leader = lead(log, isr=(0, 1))
    append(log, 1, b"a")
    assert leader.on_follower_fetch(1, 5, 100) == []
    assert (leader.followers[1].log_end_offset, leader.followers[1].last_caught_up_ms) == (-1, 0)
    assert leader.on_follower_fetch(9, 1, 100) == []  # not a replica


def test_any_fetch_in_this_epoch_shows_the_follower_follows(log: Log) -> None:
    leader = lead(log, isr=(0, 1, 2))
    append(log, 1, b"a")
    assert not leader.followed_by(1)
    leader.on_follower_fetch(1, 5, 100)  # beyond the log end (not truncated yet): still ours
    assert leader.followed_by(1)
    assert not leader.followed_by(2)
    assert not leader.followed_by(9)  # not a replica


def test_high_watermark_is_the_minimum_over_the_isr_and_never_goes_back(log: Log) -> None:
    leader = lead(log)
    append(log, 1, b"a", b"b", b"c")
    assert leader.on_append(0) == []  # the followers' positions are unknown yet
    assert leader.on_follower_fetch(1, 3, 10) == []
    assert leader.on_follower_fetch(2, 2, 10) == [HighWatermarkAdvanced(2)]
    assert leader.on_follower_fetch(2, 1, 20) == []  # a lower position never lowers the HW
    assert leader.high_watermark == 2
    assert leader.on_follower_fetch(2, 3, 30) == [HighWatermarkAdvanced(3)]


def test_an_isr_of_one_commits_on_append_and_sync_mode_counts_only_the_fsynced_end(
    log: Log,
) -> None:
    leader = lead(log, isr=(0,))
    append(log, 1, b"a", b"b")
    assert leader.on_append(0) == [HighWatermarkAdvanced(2)]
    append(log, 1, b"c", b"d")
    assert leader.on_append(0, local_end=3) == [HighWatermarkAdvanced(3)]
    assert leader.on_append(0, local_end=2) == []  # a late fsync callback: no step back
    assert leader.on_append(0, local_end=4) == [HighWatermarkAdvanced(4)]


def test_shrink_after_the_lag_window_one_proposal_at_a_time(log: Log) -> None:
    leader = lead(log)
    append(log, 1, b"a")
    leader.on_follower_fetch(1, 1, 500)  # at the leader's LEO: caught up at 500
    leader.on_follower_fetch(2, 0, 500)  # behind: still caught up as of the creation (0)
    assert leader.tick(1_000) == []
    (proposal,) = leader.tick(1_001)
    assert proposal == AlterIsr("t", 0, 0, 1, 1, (0, 1))
    assert leader.tick(5_000) == []  # in flight
    leader.on_proposal_failed(proposal)
    (again,) = leader.tick(5_000)
    assert again == AlterIsr("t", 0, 0, 1, 1, (0,))  # 1 lags by now too


def test_a_late_failure_does_not_end_a_newer_proposal(log: Log) -> None:
    """KIP-497: the HW counts a replica being added; forgetting that proposal early could let
    the HW pass a replica that the ISR is about to include."""
    leader = lead(log, isr=(0, 1))
    (first,) = leader.tick(LAG + 1)  # 1 lags
    assert isinstance(first, AlterIsr)
    leader.on_state(state(isr=(0, 1), partition_epoch=2), LAG + 1)  # the controller's change
    append(log, 1, b"a")
    assert leader.on_append(LAG + 1) == []
    # The shrink ended (its CAS will fail), so 2, at the HW (0), may be proposed.
    (second,) = leader.on_follower_fetch(2, 0, LAG + 2)
    assert second == AlterIsr("t", 0, 0, 1, 2, (0, 1, 2))
    leader.on_proposal_failed(first)
    assert leader.pending == second
    leader.on_follower_fetch(1, 1, LAG + 3)
    assert leader.high_watermark == 0  # 2 (being added, at 0) still counts


@pytest.mark.parametrize(
    ("history", "hw", "follower_leo", "expands"),
    [
        # leader log before its epoch 1: (records); HW set; the follower's LEO at its fetch
        (3, 3, 3, True),
        (3, 1, 2, False),  # past the HW but not at the start of the leader's epoch (3)
        (3, 3, 2, False),  # below the HW
        (0, 0, 0, True),
    ],
)
def test_expand_when_at_the_high_watermark_and_the_epoch_start(
    log: Log, history: int, hw: int, follower_leo: int, expands: bool
) -> None:
    append(log, 0, *[b"x"] * history)
    log.update_high_watermark(hw)
    leader = lead(log, isr=(0, 1))  # 1 has not fetched: the HW stays where it was
    outputs = leader.on_follower_fetch(2, follower_leo, 10)
    assert leader.high_watermark == hw
    assert (AlterIsr("t", 0, 0, 1, 1, (0, 1, 2)) in outputs) is expands


def test_hw_over_the_maximal_isr_while_a_change_is_in_flight(log: Log) -> None:
    leader = lead(log, isr=(0, 1))
    append(log, 1, b"a", b"b")
    assert leader.on_append(5) == []
    assert leader.on_follower_fetch(1, 2, 10) == [HighWatermarkAdvanced(2)]
    (expand,) = leader.on_follower_fetch(2, 2, 20)
    assert expand == AlterIsr("t", 0, 0, 1, 1, (0, 1, 2))
    append(log, 1, b"c")
    leader.on_append(25)
    leader.on_follower_fetch(1, 3, 30)
    assert leader.high_watermark == 2  # 2 already counts (maximal ISR) and is at 2
    assert leader.on_state(state(isr=(0, 1, 2), partition_epoch=2), 40) == []
    assert leader.pending is None
    assert leader.on_follower_fetch(2, 3, 50) == [HighWatermarkAdvanced(3)]
    # A shrink in flight: the replica being removed still counts until it is out.
    append(log, 1, b"d")
    leader.on_append(55)
    leader.on_follower_fetch(1, 4, 60)
    (shrink,) = leader.tick(50 + LAG + 1)  # 2 was last caught up at 50, 1 at 60
    assert shrink == AlterIsr("t", 0, 0, 1, 2, (0, 1))
    assert leader.high_watermark == 3
    outputs = leader.on_state(state(isr=(0, 1), partition_epoch=3), 50 + LAG + 2)
    assert outputs == [HighWatermarkAdvanced(4)]


@pytest.mark.parametrize(
    ("change", "retired"),
    [
        ({"partition_epoch": 0}, False),  # older: ignored
        ({"leader": 1, "leader_epoch": 2}, True),
        ({"leader_epoch": 2}, True),  # re-elected: the broker builds a new machine
    ],
)
def test_states_that_are_old_or_retire_the_machine(
    log: Log, change: dict[str, object], retired: bool
) -> None:
    leader = lead(log, isr=(0, 1))
    append(log, 1, b"a")
    assert leader.on_state(state(**change), 10) == []
    assert leader.retired is retired
    assert leader.isr == (0, 1)
    if retired:
        assert leader.on_append(20) == leader.tick(10 * LAG) == []
        assert leader.on_follower_fetch(1, 1, 30) == []
        assert leader.check_fetch_epoch(1) == NOT_LEADER_OR_FOLLOWER
        with pytest.raises(NotLeaderOrFollowerError):
            leader.check_epoch(1)


@pytest.mark.parametrize(
    ("current", "code", "error"),
    [
        (-1, None, None),
        (1, None, None),
        (0, FENCED_LEADER_EPOCH, FencedLeaderEpochError),
        (2, UNKNOWN_LEADER_EPOCH, UnknownLeaderEpochError),
    ],
)
def test_fencing_by_current_leader_epoch(
    log: Log, current: int, code: str | None, error: type[Exception] | None
) -> None:
    append(log, 0, b"a", b"b")
    leader = lead(log)
    append(log, 1, b"c")
    assert leader.check_fetch_epoch(current) == code
    answer = leader.answer_epoch_query(EpochQuery("t", 0, current, 0))
    if error is None:
        leader.check_epoch(current)
        assert answer == EpochAnswer("t", 0, 0, 2)
        assert leader.answer_epoch_query(current, 1) == (1, 3)
    else:
        assert answer == EpochAnswer("t", 0, error=code)
        with pytest.raises(error):
            leader.check_epoch(current)
        with pytest.raises(error):
            leader.answer_epoch_query(current, 0)


def test_acks_all_needs_min_insync_replicas(log: Log) -> None:
    leader = lead(log, isr=(0, 1))
    leader.check_acks_all(2)
    with pytest.raises(NotEnoughReplicasError):
        leader.check_acks_all(3)


def test_followers_follow_the_replica_set(log: Log) -> None:
    leader = lead(log, now_ms=5)
    assert sorted(leader.followers) == [1, 2]
    moved = PartitionState(
        topic="t", partition=0, leader=0, leader_epoch=1, partition_epoch=2,
        replicas=(0, 2, 3), isr=(0, 2),
    )  # fmt: skip
    leader.on_state(moved, 50)
    assert sorted(leader.followers) == [2, 3]
    assert leader.followers[3].last_caught_up_ms == 50  # a full lag window to show up


def test_a_session_that_keeps_fetching_keeps_its_caught_up_followers_in_the_isr(
    log: Log,
) -> None:
    """KIP-227: an incremental fetch does not name an unchanged partition; while the follower's
    session keeps fetching and its position is the leader's LEO, it is caught up."""
    append(log, 1, b"a")
    leader = lead(log)
    clock_1, clock_2 = SessionClock(0), SessionClock(0)
    leader.on_follower_fetch(1, 1, 10, clock_1)
    leader.on_follower_fetch(2, 1, 10, clock_2)
    clock_1.last_fetch_ms = clock_2.last_fetch_ms = 10 + LAG  # idle rounds since
    assert leader.tick(10 + LAG + 1) == []
    clock_2.closed = True  # follower 2's session was evicted: its rounds no longer count
    (shrink,) = leader.tick(10 + LAG + 1)
    assert isinstance(shrink, AlterIsr)
    assert shrink.new_isr == (0, 1)


def test_a_session_does_not_vouch_for_a_follower_behind_or_forgotten(log: Log) -> None:
    leader = lead(log)
    clock = SessionClock(0)
    leader.on_follower_fetch(1, 0, 10, clock)
    leader.on_follower_fetch(2, 0, 10, clock)
    append(log, 1, b"a")  # follower 1 never fetches it; follower 2 is forgotten
    leader.on_follower_forgotten(2)
    clock.last_fetch_ms = 10 + LAG
    (shrink,) = leader.tick(10 + LAG + 1)
    assert isinstance(shrink, AlterIsr)
    assert shrink.new_isr == (0,)
