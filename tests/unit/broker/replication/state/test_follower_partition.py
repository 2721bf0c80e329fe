"""FollowerPartition on real logs: KIP-101/KIP-279 truncation against a real leader, fetching,
out-of-range resets and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.broker.replication.support import (
    LAG,
    append,
    epochs_of,
    log_bytes,
    make_log,
    state,
    write_history,
)
from yak.record.batch_header import iter_batches
from yak_broker.replication.state.follower_partition import FollowerPartition, FollowerStatus
from yak_broker.replication.state.leader_partition import LeaderPartition
from yak_broker.replication.state.messages import (
    FENCED_LEADER_EPOCH,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    UNKNOWN_LEADER_EPOCH,
    EpochAnswer,
    EpochQuery,
    FetchAnswer,
    FetchPosition,
)
from yak_broker.storage.log import Log

History = list[tuple[int, int]]


def follow(log: Log, epoch: int = 2) -> FollowerPartition:
    return FollowerPartition(1, state(leader=0, leader_epoch=epoch), log)


def batches(log: Log) -> list[tuple[int, int, bytes]]:
    """(offset, epoch, bytes) of every batch: what two replicas must agree on."""
    data = log_bytes(log)
    return [
        (h.base_offset, h.partition_leader_epoch, data[pos : pos + h.size])
        for pos, h in iter_batches(data)
    ]


def truncate_against(follower: FollowerPartition, leader: LeaderPartition) -> int:
    """Epoch queries until the follower fetches; the number of rounds."""
    rounds = 0
    while isinstance(query := follower.next_request(), EpochQuery):
        follower.on_epoch_answer(leader.answer_epoch_query(query))
        rounds += 1
        assert rounds < 10
    return rounds


@pytest.mark.parametrize(
    ("ours", "our_hw", "theirs", "epoch", "truncated_to", "rounds"),
    [
        # ours / theirs: (epoch, record count) runs; the leader leads ``epoch``
        ([(0, 3)], 3, [(0, 3)], 1, 3, 1),  # same history
        # KIP-101 scenario 1: a restarted follower whose HW lags keeps what the leader has
        ([(0, 2)], 1, [(0, 2)], 1, 2, 1),
        # KIP-101 scenario 2: we hold m2 of epoch 0, the new leader wrote m3 over it in epoch 1
        ([(0, 2)], 0, [(0, 1), (1, 1)], 1, 1, 1),
        # the old leader's uncommitted suffix: the new leader's epoch 0 ended at 3
        ([(0, 5)], 2, [(0, 3)], 1, 3, 1),
        ([(0, 2)], 0, [(0, 3), (1, 2)], 2, 2, 1),  # simply behind: nothing to cut
        # KIP-279: we led epoch 2 briefly, the leader never saw it and wrote epoch 1 instead:
        # it answers (1, 6); we lack epoch 1, cut to the end of our epoch 0 and ask again
        ([(0, 3), (2, 2)], 3, [(0, 3), (1, 3)], 3, 3, 2),
        # we hold epoch 1 records the new leader of epoch 2 never got
        ([(0, 2), (1, 2)], 2, [(0, 2)], 2, 2, 1),
        ([], 0, [(0, 2)], 1, 0, 1),  # an empty follower: the leader knows no epoch -1
        ([(0, 3)], 0, [], 1, 0, 1),  # an empty leader (unclean election): cut everything
    ],
)
def test_truncation_to_the_divergence_point_then_replicas_agree(
    tmp_path: Path,
    ours: History,
    our_hw: int,
    theirs: History,
    epoch: int,
    truncated_to: int,
    rounds: int,
) -> None:
    mine, source = make_log(tmp_path, "follower"), make_log(tmp_path, "leader")
    write_history(mine, ours)
    mine.update_high_watermark(our_hw)
    write_history(source, theirs)
    leader = LeaderPartition(
        0, state(leader_epoch=epoch), source, now_ms=0, replica_lag_time_max_ms=LAG
    )
    follower = follow(mine, epoch)
    assert mine.log_end_offset == sum(count for _, count in ours)  # nothing before an answer
    assert truncate_against(follower, leader) == rounds
    assert mine.log_end_offset == truncated_to
    assert follower.status is FollowerStatus.FETCHING
    assert batches(mine) == batches(source)[: len(batches(mine))]  # a prefix of the leader
    position = follower.next_request()
    assert position == FetchPosition("t", 0, truncated_to, epoch)
    answer = FetchAnswer("t", 0, source.log_end_offset, 0, log_bytes(source, truncated_to))
    follower.on_fetch_answer(position, answer)
    assert batches(mine) == batches(source)
    assert epochs_of(mine) == [e for e in epochs_of(source) if e[1] < source.log_end_offset]


def test_an_empty_epoch_stamped_at_our_end_does_not_stall_truncation(tmp_path: Path) -> None:
    """We led epoch 5 without writing a record (its stamp sits at our LEO, and truncating to
    the LEO leaves it); the leader never saw epoch 5. The next question is about the epoch the
    answer led us to, not our latest one again."""
    mine, source = make_log(tmp_path, "follower"), make_log(tmp_path, "leader")
    write_history(mine, [(0, 2), (2, 1)])
    mine.assign_epoch(5, 3)
    write_history(source, [(0, 2), (2, 1), (4, 2)])
    leader = LeaderPartition(
        0, state(leader_epoch=6), source, now_ms=0, replica_lag_time_max_ms=LAG
    )
    follower = follow(mine, 6)
    assert follower.next_request() == EpochQuery("t", 0, 6, 5)
    assert truncate_against(follower, leader) == 2  # (4, 5), then (2, 3)
    assert follower.next_request() == FetchPosition("t", 0, 3, 6)


@pytest.mark.parametrize(
    ("answer", "end", "done"),
    [
        ((-1, -1), 1, True),  # the leader knows no epoch <= ours: KIP-101's HW fallback
        ((0, 2), 2, True),
        ((0, 9), 3, True),  # the leader's epoch 0 went further: nothing to cut
        ((5, 9), 3, True),  # an epoch we do not know at all (our cache is older): keep ours
    ],
)
def test_epoch_answer_table(tmp_path: Path, answer: tuple[int, int], end: int, done: bool) -> None:
    log = make_log(tmp_path)
    append(log, 0, b"a", b"b", b"c")
    log.update_high_watermark(1)
    follower = follow(log)
    follower.on_epoch_answer(EpochAnswer("t", 0, *answer))
    assert log.log_end_offset == end
    assert (follower.status is FollowerStatus.FETCHING) is done


def test_fetching_appends_the_leader_batches_and_learns_the_hw(tmp_path: Path) -> None:
    log, source = make_log(tmp_path, "follower"), make_log(tmp_path, "leader")
    append(source, 2, b"a", b"b")
    follower = follow(log)
    follower.on_epoch_answer(EpochAnswer("t", 0, -1, -1))
    position = follower.next_request()
    assert position == FetchPosition("t", 0, 0, 2)
    records = log_bytes(source)
    assert follower.on_fetch_answer(position, FetchAnswer("t", 0, 1, 0, records)) == len(records)
    assert (log.log_end_offset, log.high_watermark, log.latest_epoch) == (2, 1, 2)
    # An answer to an older position (a round built before the log moved) is ignored.
    assert follower.on_fetch_answer(position, FetchAnswer("t", 0, 2, 0, records)) == 0
    assert (log.log_end_offset, log.high_watermark) == (2, 1)
    position = follower.next_request()
    assert isinstance(position, FetchPosition)
    follower.on_fetch_answer(position, FetchAnswer("t", 0, 7, 0, b""))
    assert log.high_watermark == 2  # min(leader HW, our LEO)


def test_out_of_range_below_the_leader_start_restarts_the_log_there(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    append(log, 0, b"a")
    follower = follow(log)
    follower.on_epoch_answer(EpochAnswer("t", 0, 0, 1))
    position = follower.next_request()
    assert isinstance(position, FetchPosition)
    follower.on_fetch_answer(position, FetchAnswer("t", 0, 50, 40, error=OFFSET_OUT_OF_RANGE))
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (40, 40, 40)
    assert follower.status is FollowerStatus.FETCHING
    assert follower.next_request() == FetchPosition("t", 0, 40, 2)


def test_out_of_range_above_the_leader_end_truncates_again(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    append(log, 0, b"a", b"b")
    follower = follow(log)
    follower.on_epoch_answer(EpochAnswer("t", 0, 0, 5))
    position = follower.next_request()
    assert isinstance(position, FetchPosition)
    follower.on_fetch_answer(position, FetchAnswer("t", 0, 1, 0, error=OFFSET_OUT_OF_RANGE))
    assert follower.status is FollowerStatus.TRUNCATING
    assert follower.next_request() == EpochQuery("t", 0, 2, 0)


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (FENCED_LEADER_EPOCH, FollowerStatus.FENCED),  # idle until a new machine
        (NOT_LEADER_OR_FOLLOWER, None),  # the leader's metadata lags: retried
        (UNKNOWN_LEADER_EPOCH, None),
    ],
)
def test_errors(tmp_path: Path, error: str, status: FollowerStatus | None) -> None:
    log = make_log(tmp_path)
    truncating, fetching = follow(log), follow(log)
    fetching.on_epoch_answer(EpochAnswer("t", 0, -1, -1))
    before = (truncating.next_request(), fetching.next_request())
    truncating.on_epoch_answer(EpochAnswer("t", 0, error=error))
    position = fetching.next_request()
    assert isinstance(position, FetchPosition)
    fetching.on_fetch_answer(position, FetchAnswer("t", 0, error=error))
    for machine, was in zip((truncating, fetching), before, strict=True):
        assert machine.last_error == error
        if status is FollowerStatus.FENCED:
            assert machine.status is status
            assert machine.next_request() is None
        else:
            assert machine.next_request() == was


def test_refused_batches_leave_the_log_alone(tmp_path: Path) -> None:
    log, source = make_log(tmp_path, "follower"), make_log(tmp_path, "leader")
    append(source, 2, b"a")
    follower = follow(log)
    follower.on_epoch_answer(EpochAnswer("t", 0, -1, -1))
    position = follower.next_request()
    assert isinstance(position, FetchPosition)
    corrupt = bytearray(log_bytes(source))
    corrupt[-1] ^= 0xFF
    assert follower.on_fetch_answer(position, FetchAnswer("t", 0, 1, 0, bytes(corrupt))) == 0
    assert follower.last_error == "CORRUPT_MESSAGE"
    assert (log.log_end_offset, follower.status) == (0, FollowerStatus.FETCHING)


def test_only_a_follower_may_create_the_machine(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="leads"):
        FollowerPartition(0, state(), make_log(tmp_path))
