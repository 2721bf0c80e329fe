"""The replication machines one rule at a time, on real logs (scenario tables)."""

from __future__ import annotations

from pathlib import Path

import pytest

from yak.errors import FencedLeaderEpochError, NotEnoughReplicasError, UnknownLeaderEpochError
from yak.metadata.models import PartitionState
from yak.record import RecordInput, encode_batch
from yak_broker.replication.follower_partition import FollowerPartition, FollowerStatus
from yak_broker.replication.leader_partition import LeaderPartition
from yak_broker.replication.messages import (
    FENCED_LEADER_EPOCH,
    OFFSET_OUT_OF_RANGE,
    AlterIsr,
    EpochAnswer,
    EpochQuery,
    FetchAnswer,
    FetchPosition,
    HighWatermarkAdvanced,
)
from yak_broker.storage.log import FetchIsolation, Log

LAG = 1_000


def state(**changes: object) -> PartitionState:
    base = PartitionState(
        topic="t",
        partition=0,
        leader=0,
        leader_epoch=1,
        partition_epoch=1,
        replicas=(0, 1, 2),
        isr=(0, 1, 2),
    )
    return base.model_copy(update=changes)


def append(log: Log, epoch: int, *values: bytes) -> None:
    log.append(encode_batch([RecordInput(value=v, timestamp=0) for v in values]), epoch)


@pytest.fixture
def log(tmp_path: Path) -> Log:
    return Log.open(tmp_path / "t-0")


def test_becoming_leader_stamps_the_epoch_at_the_log_end(log: Log) -> None:
    append(log, 0, b"a", b"b")
    leader = LeaderPartition(0, state(), log, now_ms=0, replica_lag_time_max_ms=LAG)
    assert log.latest_epoch == 1
    assert leader.epoch_start_offset == 2
    assert log.end_offset_for_epoch(0) == (0, 2)  # epoch 0 ends where epoch 1 starts


def test_high_watermark_is_the_minimum_over_the_isr_and_never_goes_back(log: Log) -> None:
    leader = LeaderPartition(0, state(), log, now_ms=0, replica_lag_time_max_ms=LAG)
    append(log, 1, b"a", b"b", b"c")
    assert leader.on_append(0) == []  # followers' positions unknown yet
    assert leader.on_follower_fetch(1, 3, 10) == []
    assert leader.on_follower_fetch(2, 2, 10) == [HighWatermarkAdvanced(2)]
    assert leader.on_follower_fetch(2, 1, 20) == []  # a lower position never lowers the HW
    assert log.high_watermark == 2
    assert leader.on_follower_fetch(2, 3, 30) == [HighWatermarkAdvanced(3)]


def test_caught_up_rule_and_shrink_after_the_lag_window(log: Log) -> None:
    leader = LeaderPartition(0, state(), log, now_ms=0, replica_lag_time_max_ms=LAG)
    append(log, 1, b"a")
    leader.on_follower_fetch(1, 1, 500)  # at the leader's LEO: caught up at 500
    leader.on_follower_fetch(2, 0, 500)  # behind: not caught up (still 0 from the start)
    append(log, 1, b"b")
    leader.on_follower_fetch(2, 1, 900)  # reached the LEO of its previous fetch: as of 500
    assert leader.followers[2].last_caught_up_ms == 500
    assert leader.tick(1_400) == []
    (proposal,) = leader.tick(1_600)  # both last caught up at 500: 1_100 ms > 1_000
    assert proposal == AlterIsr("t", 0, 0, 1, 1, (0,))
    assert leader.tick(5_000) == []  # one proposal in flight at a time
    leader.on_proposal_failed()
    assert leader.tick(5_000) == [proposal]


def test_expand_when_caught_up_and_hw_over_the_maximal_isr(log: Log) -> None:
    leader = LeaderPartition(0, state(isr=(0, 1)), log, now_ms=0, replica_lag_time_max_ms=LAG)
    append(log, 1, b"a", b"b")
    assert leader.on_append(0) == []
    assert leader.on_follower_fetch(1, 2, 10) == [HighWatermarkAdvanced(2)]
    assert leader.on_follower_fetch(2, 1, 10) == []  # below the HW: not yet
    (proposal,) = leader.on_follower_fetch(2, 2, 20)
    assert proposal == AlterIsr("t", 0, 0, 1, 1, (0, 1, 2))
    append(log, 1, b"c")
    leader.on_append(25)
    leader.on_follower_fetch(1, 3, 30)
    assert log.high_watermark == 2  # 2 counts already (maximal ISR) and is at 2
    assert leader.on_state(state(isr=(0, 1, 2), partition_epoch=2), 40) == []
    assert leader.pending is None
    assert leader.on_follower_fetch(2, 3, 50) == [HighWatermarkAdvanced(3)]


def test_fencing_and_min_insync(log: Log) -> None:
    leader = LeaderPartition(0, state(isr=(0,)), log, now_ms=0, replica_lag_time_max_ms=LAG)
    leader.check_epoch(-1)
    leader.check_epoch(1)
    with pytest.raises(FencedLeaderEpochError):
        leader.check_epoch(0)
    with pytest.raises(UnknownLeaderEpochError):
        leader.check_epoch(2)
    leader.check_acks_all(1)
    with pytest.raises(NotEnoughReplicasError):
        leader.check_acks_all(2)
    assert leader.on_state(state(leader=1, leader_epoch=2), 0) == []  # retired: no effect


def _follower(log: Log, epoch: int = 2) -> FollowerPartition:
    return FollowerPartition(1, state(leader=0, leader_epoch=epoch), log)


@pytest.mark.parametrize(
    ("ours", "answer", "expected_end", "done"),
    [
        # ours: [(epoch, count)], answer: (epoch, end offset) -> our LEO after truncation
        ([(0, 3), (1, 2)], (1, 5), 5, True),  # same history
        ([(0, 3), (1, 2)], (1, 4), 4, True),  # the leader's epoch 1 ends earlier (KIP-101)
        ([(0, 3), (1, 2)], (0, 3), 3, True),  # leader never saw our epoch 1 (KIP-279)
        ([(0, 3), (2, 2)], (1, 4), 3, False),  # we lack the leader's epoch 1: partial, ask again
        ([(0, 3)], (-1, -1), 0, True),  # leader knows nothing so old: back to our HW (0)
    ],
)
def test_follower_truncates_to_the_divergence_point(
    log: Log,
    ours: list[tuple[int, int]],
    answer: tuple[int, int],
    expected_end: int,
    done: bool,
) -> None:
    for epoch, count in ours:
        for _ in range(count):  # one batch per record: epochs end on batch boundaries
            append(log, epoch, b"x")
    follower = _follower(log, epoch=3)
    query = follower.next_request()
    assert query == EpochQuery("t", 0, 3, ours[-1][0])
    follower.on_epoch_answer(EpochAnswer("t", 0, *answer))
    assert log.log_end_offset == expected_end
    assert (follower.status is FollowerStatus.FETCHING) == done


def test_follower_fetching_appends_and_learns_the_hw(log: Log, tmp_path: Path) -> None:
    source = Log.open(tmp_path / "leader")
    append(source, 2, b"a", b"b")
    follower = _follower(log)
    follower.on_epoch_answer(EpochAnswer("t", 0, -1, -1))
    position = follower.next_request()
    assert position == FetchPosition("t", 0, 0, 2)
    records = bytes(source.read(0, 1 << 20, FetchIsolation.LOG_END).records)
    assert follower.on_fetch_answer(position, FetchAnswer("t", 0, 1, 0, records)) > 0
    assert (log.log_end_offset, log.high_watermark, log.latest_epoch) == (2, 1, 2)
    stale = FetchPosition("t", 0, 0, 2)  # an answer to an older request is ignored
    assert follower.on_fetch_answer(stale, FetchAnswer("t", 0, 2, 0, records)) == 0
    assert log.log_end_offset == 2


def test_follower_out_of_range_and_fencing(log: Log) -> None:
    follower = _follower(log)
    follower.on_epoch_answer(EpochAnswer("t", 0, -1, -1))
    position = follower.next_request()
    assert isinstance(position, FetchPosition)
    follower.on_fetch_answer(position, FetchAnswer("t", 0, 50, 40, error=OFFSET_OUT_OF_RANGE))
    assert log.log_start_offset == log.log_end_offset == 40  # the leader's data starts at 40
    position = follower.next_request()
    assert isinstance(position, FetchPosition)
    follower.on_fetch_answer(position, FetchAnswer("t", 0, error=FENCED_LEADER_EPOCH))
    assert follower.status is FollowerStatus.FENCED
    assert follower.next_request() is None
