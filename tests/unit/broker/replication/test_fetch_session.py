"""FetchSession: one round per leader broker, answers dispatched to the machines that asked."""

from __future__ import annotations

from pathlib import Path

from tests.unit.broker.replication.support import append, log_bytes, make_log, state
from yak_broker.replication.fetch_session import FetchSession
from yak_broker.replication.follower_partition import FollowerPartition, FollowerStatus
from yak_broker.replication.messages import EpochAnswer, EpochQuery, FetchAnswer, FetchPosition
from yak_broker.storage.log import Log


def follower(log: Log, partition: int, epoch: int = 1) -> FollowerPartition:
    return FollowerPartition(1, state(partition=partition, leader_epoch=epoch), log)


def test_a_round_asks_epochs_for_truncating_partitions_and_fetches_the_others(
    tmp_path: Path,
) -> None:
    session = FetchSession()
    assert not session.build()
    truncating = follower(make_log(tmp_path, "t-0"), 0)
    fetching = follower(make_log(tmp_path, "t-1"), 1)
    fetching.on_epoch_answer(EpochAnswer("t", 1, -1, -1))
    fenced = follower(make_log(tmp_path, "t-2"), 2)
    fenced.on_epoch_answer(EpochAnswer("t", 2, error="FENCED_LEADER_EPOCH"))
    for machine in (truncating, fetching, fenced):
        session.add(machine)
    assert len(session) == 3
    assert ("t", 0) in session
    round_ = session.build()
    assert round_.epoch_queries() == [EpochQuery("t", 0, 1, -1)]
    assert round_.fetch_positions() == [FetchPosition("t", 1, 0, 1)]  # fenced: nothing


def test_answers_reach_the_machines_that_asked_and_no_newer_one(tmp_path: Path) -> None:
    source = make_log(tmp_path, "leader")
    append(source, 1, b"a", b"b")
    records = log_bytes(source)
    logs = [make_log(tmp_path, f"t-{p}") for p in range(3)]
    machines = [follower(log, p) for p, log in enumerate(logs)]
    for machine in machines:
        machine.on_epoch_answer(EpochAnswer("t", machine.partition, -1, -1))
    session = FetchSession()
    for machine in machines:
        session.add(machine)
    round_ = session.build()
    session.remove("t", 1)  # partition 1 is no longer fetched from this leader
    replaced = follower(logs[2], 2, epoch=2)  # partition 2 has a new leader epoch
    session.add(replaced)
    answers = [FetchAnswer("t", p, 2, 0, records) for p in (0, 1, 2, 7)]
    assert session.on_fetch_answers(round_, answers) == len(records)
    assert [log.log_end_offset for log in logs] == [2, 0, 0]
    assert replaced.status is FollowerStatus.TRUNCATING
    # The next round asks again for what is still fetched here, each in its state.
    again = session.build()
    assert again.fetch_positions() == [FetchPosition("t", 0, 2, 1)]
    assert again.epoch_queries() == [EpochQuery("t", 2, 2, -1)]
    session.on_epoch_answers(round_, [EpochAnswer("t", 2, -1, -1)])  # the old round's
    assert replaced.status is FollowerStatus.TRUNCATING
    session.on_epoch_answers(again, [EpochAnswer("t", 2, -1, -1)])
    assert replaced.next_request() == FetchPosition("t", 2, 0, 2)
