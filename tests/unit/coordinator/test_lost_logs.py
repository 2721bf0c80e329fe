"""The controller and lost logs (empty-disk restarts, issue 21 item 2).

A live broker whose registration names another data folder (``log_dir_id``) than its ISR
entry (``PartitionState.isr_log_dirs``) lost the log the ISR counted on: it leaves the ISR,
is never elected (clean, preferred, or unclean while another replica lives), and a partition
it led elects another in-sync replica. States without entries (older writers) are decided as
before.
"""

from __future__ import annotations

from types import MappingProxyType

from yak.metadata.models import NO_LEADER, BrokerRegistration, PartitionState, TopicRecord
from yak.metadata.snapshot import ClusterSnapshot
from yak_coordinator.decisions.partition_plan import (
    UpdatePartition,
    elect_preferred_leader,
    next_partition_state,
    plan_new_partitions,
    reconcile,
)

LIVE = frozenset({1, 2, 3})
OLD = {1: "d1", 2: "d2", 3: "d3"}
#: Broker 1 came back on an empty disk.
WIPED = {**OLD, 1: "d1-new"}


def part(leader: int, isr: tuple[int, ...], dirs: dict[int, str] | None = None) -> PartitionState:
    return PartitionState(
        topic="t",
        partition=0,
        leader=leader,
        leader_epoch=4,
        partition_epoch=7,
        replicas=(1, 2, 3),
        isr=isr,
        isr_log_dirs={b: OLD[b] for b in isr} if dirs is None else dirs,
    )


def test_a_follower_that_lost_its_log_leaves_the_isr() -> None:
    change = next_partition_state(part(2, (1, 2, 3)), LIVE, log_dirs=WIPED)
    assert change is not None
    after, reason = change
    assert (after.leader, after.isr, after.leader_epoch, after.partition_epoch) == (2, (2, 3), 4, 8)
    assert after.isr_log_dirs == {2: "d2", 3: "d3"}
    assert reason == "replica that lost its log left the ISR"
    assert next_partition_state(after, LIVE, log_dirs=WIPED) is None


def test_a_leader_that_lost_its_log_is_replaced_by_an_in_sync_replica() -> None:
    change = next_partition_state(part(1, (1, 2, 3)), LIVE, log_dirs=WIPED)
    assert change is not None
    after, reason = change
    assert (after.leader, after.isr, after.leader_epoch) == (2, (2, 3), 5)
    assert reason == "leader election"


def test_the_same_folder_back_is_elected_as_before() -> None:
    """A restart with its disk: the last ISR member is re-elected cleanly."""
    change = next_partition_state(part(NO_LEADER, (1,)), LIVE, log_dirs=OLD)
    assert change is not None
    assert (change[0].leader, change[0].isr) == (1, (1,))


def test_the_last_isr_member_that_lost_its_log_is_kept_but_never_elected() -> None:
    offline = part(NO_LEADER, (1,))
    assert next_partition_state(offline, LIVE, log_dirs=WIPED) is None
    change = next_partition_state(part(1, (1,)), LIVE, log_dirs=WIPED)
    assert change is not None
    after, _ = change
    assert (after.leader, after.isr, after.isr_log_dirs) == (NO_LEADER, (1,), {1: "d1"})


def test_unclean_election_prefers_a_replica_that_kept_a_log() -> None:
    offline = part(NO_LEADER, (1,))
    change = next_partition_state(offline, LIVE, unclean=True, log_dirs=WIPED)
    assert change is not None
    after, reason = change
    assert (after.leader, after.isr, after.isr_log_dirs) == (2, (2,), {2: "d2"})
    assert reason == "unclean leader election"
    alone = next_partition_state(offline, frozenset({1}), unclean=True, log_dirs=WIPED)
    assert alone is not None
    assert (alone[0].leader, alone[0].isr_log_dirs) == (1, {1: "d1-new"})  # the last resort


def test_preferred_leader_election_refuses_a_replica_that_lost_its_log() -> None:
    state = part(2, (1, 2, 3))
    assert elect_preferred_leader(state, LIVE, log_dirs=WIPED) == "PREFERRED_LEADER_NOT_AVAILABLE"
    elected = elect_preferred_leader(state, LIVE, log_dirs=OLD)
    assert isinstance(elected, PartitionState)
    assert elected.leader == 1


def test_states_and_brokers_without_folder_ids_are_decided_as_before() -> None:
    legacy = part(1, (1, 2, 3), dirs={})
    assert next_partition_state(legacy, LIVE, log_dirs=WIPED) is None
    assert next_partition_state(part(1, (1, 2, 3)), LIVE, log_dirs={1: "", 2: "", 3: ""}) is None


def registration(broker_id: int, log_dir_id: str) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=broker_id,
        host="127.0.0.1",
        port=9000 + broker_id,
        started_at_ms=1,
        log_dir_id=log_dir_id,
    )


def test_new_partitions_record_each_replicas_folder() -> None:
    record = TopicRecord(
        name="t", topic_id="id", partitions=1, replication_factor=3, created_at_ms=1
    )
    brokers = {b: registration(b, d) for b, d in OLD.items()}
    (state,) = plan_new_partitions(record, [], brokers)
    assert state.isr_log_dirs == {b: OLD[b] for b in state.isr}


def test_reconcile_reads_the_folders_from_the_registrations() -> None:
    record = TopicRecord(
        name="t", topic_id="id", partitions=1, replication_factor=3, created_at_ms=1
    )
    snapshot = ClusterSnapshot(
        revision=10,
        brokers=MappingProxyType({b: registration(b, d) for b, d in WIPED.items()}),
        topics=MappingProxyType({"t": record}),
        partitions=MappingProxyType({("t", 0): part(1, (1, 2, 3))}),
    )
    (action,) = reconcile(snapshot)
    assert isinstance(action, UpdatePartition)
    assert (action.after.leader, action.after.isr) == (2, (2, 3))
