"""An incremental round answered without a session (the leader restarted as a version without
fetch sessions, or closed ours and answered sessionless): the follower's next round is full.

Such a leader reads only the partitions a round names, so staying incremental would name only
moved positions and never fetch what was appended to the others. Kafka's
``FetchSessionHandler`` likewise starts over when an incremental response has session id 0.
Found while adding the simulation's mixed-version mode (a leader process restarted without
sessions); the random schedules reach it rarely.
"""

from __future__ import annotations

from pathlib import Path

from tests.unit.broker.replication.support import make_log, state
from yak_broker.replication.state.fetch_session import FetchSession
from yak_broker.replication.state.follower_partition import FollowerPartition
from yak_broker.replication.state.messages import EpochAnswer, FetchPosition


def test_an_incremental_round_answered_sessionless_starts_over_full(tmp_path: Path) -> None:
    session = FetchSession()
    for partition in (0, 1):
        log = make_log(tmp_path, f"t-{partition}")
        machine = FollowerPartition(1, state(partition=partition), log)
        machine.on_epoch_answer(EpochAnswer("t", partition, -1, -1))
        session.add(machine)
    full = session.next_round()
    session.on_session_response(full, 77, 0)
    incremental = session.next_round()
    assert (incremental.session_id, incremental.session_epoch) == (77, 1)
    assert not incremental.fetch_positions()
    session.on_session_response(incremental, 0, 0)  # no session on the leader any more
    again = session.next_round()
    assert (again.session_id, again.session_epoch) == (0, 0)
    assert again.fetch_positions() == [FetchPosition("t", 0, 0, 1), FetchPosition("t", 1, 0, 1)]
