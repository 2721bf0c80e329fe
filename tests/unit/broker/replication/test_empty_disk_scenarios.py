"""Scripted empty-disk restarts on the simulated cluster (issue 21 item 2), invariants checked
after every step (``sim_invariants``, 8 in particular).

A broker restarted on an empty data folder comes back with a new folder id; the ISR records
the folder each member was in sync with (``PartitionState.isr_log_dirs``). Each script is a
race that, without that record, lets the empty log lead or count as in sync, and acknowledged
batches are lost (each fails with the fix reverted): the new process serving before its old
registration expired, the controller seeing the new registration without the old one going,
and the wiped broker as the last ISR member.

Partition 0 has replicas (0, 1, 2); broker 0 leads epoch 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.broker.replication.sim_cluster import LAG_MAX_MS
from tests.unit.broker.replication.sim_fetch import MAX_WAIT_MS, Mode
from tests.unit.broker.replication.sim_network import Envelope, Fetch
from tests.unit.broker.replication.test_scenarios import Script
from yak.metadata.models import NO_LEADER
from yak_coordinator.decisions.partition_plan import next_partition_state


@pytest.fixture(params=[Mode.SESSIONLESS, Mode.SESSIONS], ids=lambda mode: mode.value)
def script(tmp_path: Path, request: pytest.FixtureRequest) -> Script:
    return Script(tmp_path, request.param)


def acked_twice(script: Script) -> dict[int, int]:
    assert script.produce(0) == "OK"
    assert script.produce(0) == "OK"
    script.replicate(3)
    assert script.acked == {0: 0, 1: 1}
    return dict(script.acked)


def held_everywhere(script: Script, acked: dict[int, int]) -> None:
    for broker_id in (0, 1, 2):
        log = script.log(broker_id)
        assert {o: log[o][1] for o in acked} == acked, f"broker {broker_id}: {log}"


def test_a_leader_back_on_an_empty_disk_before_its_lease_expired_does_not_lead(
    script: Script,
) -> None:
    """The real broker serves while its registrar waits for the old lease: the metadata still
    names it leader of epoch 0. Leading its empty log, it would answer the followers' epoch
    queries with "epoch 0 ends at 0" and they would truncate every acknowledged batch."""
    cluster = script.cluster
    acked = acked_twice(script)
    script.do(lambda: cluster.crash(0))
    script.do(lambda: cluster.restart(0, wipe=True, race="early"))
    assert cluster.states[0].leader == 0  # the controller has not seen it go yet
    assert cluster.brokers[0].replicas[0].leader is None
    assert script.produce(0) == "NOT_LEADER_OR_FOLLOWER"
    script.replicate(3)  # the followers are refused, and keep their logs
    assert script.log(1) == script.log(2)
    assert len(script.log(1)) == 2
    script.do(lambda: cluster.expire(0))  # then it registers with its new folder
    state = cluster.states[0]
    assert state.leader == 1
    assert 0 not in state.isr
    script.replicate(4)
    state = cluster.states[0]
    assert 0 in state.isr
    assert state.isr_log_dirs[0] == cluster.brokers[0].log_dir == "dir0.1"
    held_everywhere(script, acked)


def test_a_follower_back_on_an_empty_disk_leaves_the_isr_and_is_not_elected(
    script: Script,
) -> None:
    """The controller sees the new registration without having seen the old one go: the
    wiped follower is still in the ISR, first in replica order after the leader. It must
    leave it, and the leader's death must elect broker 2, not the empty broker 1."""
    cluster = script.cluster
    acked = acked_twice(script)
    script.do(lambda: cluster.crash(1))
    script.do(lambda: cluster.restart(1, wipe=True, race="coalesced"))
    assert script.isr() == (0, 2)

    def from_one(envelope: Envelope) -> bool:
        return envelope.src == 1 and isinstance(envelope.body, Fetch)

    script.replicate(2, held=from_one)  # broker 1 does not catch up yet
    script.do(lambda: cluster.crash(0))
    script.do(lambda: cluster.expire(0))
    assert (cluster.states[0].leader, script.isr()) == (2, (2,))
    script.do(lambda: cluster.restart(0))
    cluster.network.queue.clear()  # broker 1's held fetches went to a dead leader
    script.replicate(6)
    assert sorted(cluster.states[0].isr) == [0, 1, 2]
    held_everywhere(script, acked)


def test_a_fetch_of_the_lost_log_does_not_bring_it_back_into_the_isr(script: Script) -> None:
    """KIP-903: the leader heard the old follower process caught up; the new one, on an
    empty folder, fetches from offset 0. It rejoins only once its own log has caught up."""
    cluster = script.cluster
    acked = acked_twice(script)
    script.do(lambda: cluster.crash(2))
    script.do(lambda: cluster.restart(2, wipe=True, race="coalesced"))
    assert cluster.states[0].isr == (0, 1)
    leader = cluster.brokers[0].replicas[0].leader
    assert leader is not None
    for _ in range(10):  # until its first fetch (from offset 0) reaches the leader
        cluster.fetch_round(2, 0)
        script.deliver()
        if leader.followers[2].log_dir_id == "dir2.1":
            break
        script.do(lambda: cluster.tick(MAX_WAIT_MS))  # a parked session fetch is answered
    assert leader.followers[2].log_end_offset == 0  # the old process's progress is gone
    assert 2 not in cluster.states[0].isr
    script.replicate(4)
    assert cluster.states[0].isr_log_dirs[2] == "dir2.1"
    held_everywhere(script, acked)


def test_the_last_isr_member_back_on_an_empty_disk_waits_offline(script: Script) -> None:
    """The others left the ISR, then the leader lost its disk: its log was the only in-sync
    copy the metadata knew. Electing it would make the others truncate to nothing; the
    partition waits without a leader. Unclean election then prefers a replica with a log."""
    cluster = script.cluster
    acked = acked_twice(script)
    cluster.isolate(1)
    cluster.isolate(2)
    assert script.produce(0, acks_all=False) == "OK"  # the followers lag behind it
    script.do(lambda: cluster.tick(LAG_MAX_MS + 1))
    assert script.isr() == (0,)
    script.do(lambda: cluster.crash(0))
    script.do(lambda: cluster.expire(0))
    assert (cluster.states[0].leader, script.isr()) == (NO_LEADER, (0,))
    script.do(cluster.heal)
    script.do(lambda: cluster.restart(0, wipe=True))
    state = cluster.states[0]
    assert (state.leader, state.isr) == (NO_LEADER, (0,))  # kept, never elected
    assert cluster.brokers[0].replicas[0].leader is None
    assert script.produce(0) == "NOT_LEADER_OR_FOLLOWER"
    assert len(script.log(1)) == len(script.log(2)) == 2  # the acknowledged batches
    # The operator accepts an unclean election: broker 1's log, not the empty one.
    change = next_partition_state(
        state, frozenset(cluster.registered), unclean=True, log_dirs=cluster.registered
    )
    assert change is not None
    after, reason = change
    assert (after.leader, after.isr, reason) == (1, (1,), "unclean leader election")
    script.do(lambda: cluster._publish(after, reason))
    script.replicate(6)
    assert sorted(cluster.states[0].isr) == [0, 1, 2]
    held_everywhere(script, acked)
