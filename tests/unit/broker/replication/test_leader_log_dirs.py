"""LeaderPartition and data folder ids (empty-disk restarts, KIP-903 with KIP-858's ids).

A follower's progress belongs to the folder its fetches come from; it joins the ISR only on
a fetch its registration vouches for (``eligible``), recorded with that folder; an ISR member
fetching from another folder than its entry lost its log and is dropped at the next tick.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.broker.replication.support import LAG, append, make_log, state
from yak_broker.replication.isr_writer import altered_state
from yak_broker.replication.state.leader_partition import LeaderPartition
from yak_broker.replication.state.messages import AlterIsr
from yak_broker.storage.log import Log


@pytest.fixture
def log(tmp_path: Path) -> Log:
    log = make_log(tmp_path)
    append(log, 1, b"a", b"b")
    return log


def lead(log: Log, **changes: object) -> LeaderPartition:
    return LeaderPartition(
        0, state(**changes), log, now_ms=0, replica_lag_time_max_ms=LAG, log_dir_id="L"
    )


def test_a_caught_up_follower_joins_with_the_folder_it_fetched_from(log: Log) -> None:
    machine = lead(log, isr=(0, 1))
    (proposal,) = machine.on_follower_fetch(2, 2, 10, log_dir_id="F2")
    assert proposal == AlterIsr("t", 0, 0, 1, 1, (0, 1, 2), ((2, "F2"), (0, "L")))
    assert isinstance(proposal, AlterIsr)
    after = altered_state(machine.state.model_copy(update={"isr_log_dirs": {1: "F1"}}), proposal)
    assert after.isr_log_dirs == {0: "L", 1: "F1", 2: "F2"}


def test_a_fetch_its_registration_does_not_vouch_for_adds_nothing(log: Log) -> None:
    """A process not registered yet, or the late fetch of one whose log is gone."""
    machine = lead(log, isr=(0, 1))
    assert machine.on_follower_fetch(2, 2, 10, log_dir_id="F2", eligible=False) == []
    assert machine.followers[2].log_end_offset == 2  # its progress still counts


def test_a_fetch_from_another_folder_starts_the_progress_afresh(log: Log) -> None:
    machine = lead(log, isr=(0, 1))
    machine.on_follower_fetch(2, 2, 10, log_dir_id="old", eligible=False)
    machine.on_follower_fetch(2, 0, 20, log_dir_id="new")  # the empty log, from 0
    progress = machine.followers[2]
    assert (progress.log_end_offset, progress.log_dir_id) == (0, "new")
    assert progress.last_fetch_leader_leo == 2
    assert machine.pending is None  # not caught up: not added


def test_an_isr_member_fetching_from_a_new_folder_is_dropped_at_once(log: Log) -> None:
    machine = lead(log, isr_log_dirs={0: "L", 1: "F1", 2: "F2"})
    machine.on_follower_fetch(1, 2, 10, log_dir_id="F1")
    machine.on_follower_fetch(2, 0, 10, log_dir_id="F2-new")
    assert machine.tick(11) == [AlterIsr("t", 0, 0, 1, 1, (0, 1), ())]


def test_the_leader_records_its_own_folder_when_the_state_lacks_it(log: Log) -> None:
    """A state written before the field: the leader's next change fills in its own entry."""
    machine = lead(log)
    machine.on_follower_fetch(1, 2, 10)
    (proposal,) = machine.tick(LAG + 1)  # 2 never fetched
    assert isinstance(proposal, AlterIsr)
    assert proposal.new_isr == (0, 1)
    assert proposal.log_dirs == ((0, "L"),)
    assert altered_state(machine.state, proposal).isr_log_dirs == {0: "L"}
