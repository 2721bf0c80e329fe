"""FetchSession: one round per leader broker, answers dispatched to the machines that asked."""

from __future__ import annotations

from pathlib import Path

from tests.unit.broker.replication.support import append, log_bytes, make_log, state
from yak_broker.replication.state.fetch_session import FetchSession
from yak_broker.replication.state.follower_partition import FollowerPartition, FollowerStatus
from yak_broker.replication.state.messages import (
    EpochAnswer,
    EpochQuery,
    FetchAnswer,
    FetchPosition,
)
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


# --- the incremental fetch session (KIP-227) ----------------------------------------------


def fetching(log: Log, partition: int, epoch: int = 1) -> FollowerPartition:
    machine = follower(log, partition, epoch)
    machine.on_epoch_answer(EpochAnswer("t", partition, -1, -1))
    return machine


def established(tmp_path: Path, count: int) -> tuple[FetchSession, list[FollowerPartition]]:
    """A session whose full round the leader answered with session id 77."""
    session = FetchSession()
    machines = [fetching(make_log(tmp_path, f"t-{p}"), p) for p in range(count)]
    for machine in machines:
        session.add(machine)
    full = session.next_round()
    assert (full.session_id, full.session_epoch) == (0, 0)
    assert [p.partition for p in full.fetch_positions()] == list(range(count))
    session.on_session_response(full, 77, 0)
    assert (session.session_id, session.epoch) == (77, 1)
    return session, machines


def test_an_idle_incremental_round_names_nothing_but_is_still_sent(tmp_path: Path) -> None:
    session, _ = established(tmp_path, 3)
    for epoch in (1, 2, 3):
        round_ = session.next_round()
        assert (round_.session_id, round_.session_epoch) == (77, epoch)
        assert not round_.fetch_positions()
        assert not round_.forgotten
        assert not round_.queries
        assert round_.has_fetch  # the long poll that brings the next data
        session.on_fetch_answers(round_, [])
        session.on_session_response(round_, 77, 0)


def test_a_round_names_the_partitions_whose_position_moved(tmp_path: Path) -> None:
    source = make_log(tmp_path, "leader")
    append(source, 1, b"a", b"b")
    session, machines = established(tmp_path, 3)
    idle = session.next_round()
    # The leader answers partition 1 only (it named nothing): data at the position it holds.
    session.on_fetch_answers(idle, [FetchAnswer("t", 1, 2, 0, log_bytes(source))])
    session.on_session_response(idle, 77, 0)
    assert machines[1].log.log_end_offset == 2
    moved = session.next_round()
    assert moved.fetch_positions() == [FetchPosition("t", 1, 2, 1)]
    # An answer that moves nothing (the high watermark only) is not named again.
    session.on_fetch_answers(moved, [FetchAnswer("t", 1, 2, 0)])
    session.on_session_response(moved, 77, 0)
    assert machines[1].log.high_watermark == 2
    assert not session.next_round().fetch_positions()


def test_added_removed_and_truncating_partitions_mid_session(tmp_path: Path) -> None:
    session, machines = established(tmp_path, 2)
    session.remove("t", 0)
    new = follower(make_log(tmp_path, "t-5"), 5)  # truncating first
    session.add(new)
    round_ = session.next_round()
    assert round_.forgotten == [("t", 0)]
    assert round_.epoch_queries() == [EpochQuery("t", 5, 1, -1)]
    assert not round_.fetch_positions()
    session.on_epoch_answers(round_, [EpochAnswer("t", 5, -1, -1)])
    session.on_session_response(round_, 77, 0)
    joined = session.next_round()
    assert joined.fetch_positions() == [FetchPosition("t", 5, 0, 1)]
    assert not joined.forgotten
    assert not joined.queries
    session.on_session_response(joined, 77, 0)
    # A new leader epoch replaces the machine: forgotten while it truncates, then named.
    session.add(FollowerPartition(1, state(partition=1, leader_epoch=2), machines[1].log))
    again = session.next_round()
    assert again.forgotten == [("t", 1)]
    assert again.epoch_queries() == [EpochQuery("t", 1, 2, -1)]


def test_a_refused_session_starts_over_with_a_full_round(tmp_path: Path) -> None:
    for code in (70, 71):  # FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH
        session, _ = established(tmp_path / str(code), 2)
        round_ = session.next_round()
        session.on_session_response(round_, 0, code)
        full = session.next_round()
        assert (full.session_id, full.session_epoch) == (0, 0)
        assert len(full.fetch_positions()) == 2


def test_no_answer_starts_over_closing_the_old_session(tmp_path: Path) -> None:
    session, _ = established(tmp_path, 2)
    session.next_round()
    session.on_error()
    full = session.next_round()
    assert (full.session_id, full.session_epoch) == (77, 0)  # closes 77 on the leader
    assert len(full.fetch_positions()) == 2
    session.on_session_response(full, 78, 0)
    assert (session.session_id, session.epoch) == (78, 1)


def test_a_leader_without_sessions_gets_full_rounds(tmp_path: Path) -> None:
    session = FetchSession()
    session.add(fetching(make_log(tmp_path, "t-0"), 0))
    for _ in range(2):
        round_ = session.next_round()
        assert round_.session_epoch == 0
        assert len(round_.fetch_positions()) == 1
        session.on_session_response(round_, 0, 0)  # e.g. over HTTP: sessionless


def test_an_error_answer_names_the_partition_again(tmp_path: Path) -> None:
    session, _ = established(tmp_path, 2)
    round_ = session.next_round()
    session.on_fetch_answers(round_, [FetchAnswer("t", 0, error="NOT_LEADER_OR_FOLLOWER")])
    session.on_session_response(round_, 77, 0)
    retry = session.next_round()
    assert retry.fetch_positions() == [FetchPosition("t", 0, 0, 1)]


def test_answers_to_unnamed_partitions_use_the_position_the_leader_holds(
    tmp_path: Path,
) -> None:
    source = make_log(tmp_path, "leader")
    append(source, 1, b"a")
    session, machines = established(tmp_path, 1)
    round_ = session.next_round()
    session.remove("t", 0)  # meanwhile: dropped, so its answer is not applied
    session.on_fetch_answers(round_, [FetchAnswer("t", 0, 1, 0, log_bytes(source))])
    assert machines[0].log.log_end_offset == 0
