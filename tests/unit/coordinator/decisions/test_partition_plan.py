"""Controller decisions as scenario tables: snapshot in, actions out (reconcile.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

import pytest

from yak.metadata.models import NO_LEADER, BrokerRegistration, PartitionState, TopicRecord
from yak.metadata.snapshot import ClusterSnapshot, PartitionMap
from yak_coordinator.decisions.partition_plan import (
    CreatePartitions,
    DeleteTopic,
    UpdatePartition,
    elect_preferred_leader,
    next_partition_state,
    plan_new_partitions,
    reconcile,
    reconcile_steps,
)


def broker(broker_id: int, rack: str | None = None) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=broker_id, host="127.0.0.1", port=9000 + broker_id, rack=rack, started_at_ms=1
    )


def topic(
    name: str = "t",
    partitions: int = 1,
    rf: int = 1,
    *,
    deleting: bool = False,
    unclean: bool = False,
) -> TopicRecord:
    configs = {"unclean.leader.election.enable": "true"} if unclean else {}
    return TopicRecord(
        name=name,
        topic_id=f"id-{name}",
        partitions=partitions,
        replication_factor=rf,
        configs=configs,
        created_at_ms=1,
        deleting=deleting,
    )


def part(
    p: int,
    leader: int,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    epoch: int = 0,
    *,
    name: str = "t",
    pe: int | None = None,
) -> PartitionState:
    return PartitionState(
        topic=name,
        partition=p,
        leader=leader,
        leader_epoch=epoch,
        partition_epoch=epoch if pe is None else pe,
        replicas=replicas,
        isr=isr,
    )


def snapshot(
    brokers: tuple[int, ...],
    topics: tuple[TopicRecord, ...] = (),
    partitions: tuple[PartitionState, ...] = (),
) -> ClusterSnapshot:
    return ClusterSnapshot(
        revision=10,
        brokers=MappingProxyType({b: broker(b) for b in brokers}),
        topics=MappingProxyType({t.name: t for t in topics}),
        partitions=MappingProxyType({(s.topic, s.partition): s for s in partitions}),
    )


# -- one partition's next state -----------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    state: PartitionState
    live: frozenset[int]
    leader: int | None  # None: no change expected
    isr: tuple[int, ...] = ()
    leader_epoch: int = 0
    unclean: bool = False
    preferred: bool = True
    reason: str = field(default="")


CASES = [
    Case("all alive: nothing to do", part(0, 1, (1, 2, 3), (1, 2, 3)), frozenset({1, 2, 3}), None),
    Case(
        "leader dies, ISR survivor in replica order",
        part(0, 1, (1, 2, 3), (3, 1, 2)),
        frozenset({2, 3}),
        2,
        (3, 2),
        1,
        reason="leader election",
    ),
    Case(
        "follower dies: leaves ISR, leader kept",
        part(0, 1, (1, 2, 3), (1, 2, 3)),
        frozenset({1, 3}),
        1,
        (1, 3),
        0,
        reason="dead replica left the ISR",
    ),
    Case(
        "last ISR member dies: no leader, ISR keeps it",
        part(0, 1, (1, 2), (1,)),
        frozenset({2}),
        NO_LEADER,
        (1,),
        1,
        reason="no in-sync replica alive",
    ),
    Case(
        "whole ISR dies at once: the last leader stays in the ISR",
        part(0, 2, (1, 2, 3), (1, 2)),
        frozenset({3}),
        NO_LEADER,
        (2,),
        1,
    ),
    Case(
        "unclean election opt-in: first live replica, ISR = [it]",
        part(0, 1, (1, 2, 3), (1,)),
        frozenset({3, 2}),
        2,
        (2,),
        1,
        unclean=True,
        reason="unclean leader election",
    ),
    Case(
        "leaderless and nobody alive: stays as is",
        part(0, NO_LEADER, (1, 2), (1,), 3),
        frozenset(),
        None,
    ),
    Case(
        "leaderless, ISR member returns: elected",
        part(0, NO_LEADER, (1, 2), (1,), 3),
        frozenset({1, 2}),
        1,
        (1,),
        4,
    ),
    Case(
        "leaderless, only a non-ISR replica returns: still no leader",
        part(0, NO_LEADER, (1, 2), (1,), 3),
        frozenset({2}),
        None,
    ),
    Case(
        "preferred replica back in ISR: leadership moves back",
        part(0, 2, (1, 2), (2, 1), 1),
        frozenset({1, 2}),
        1,
        (2, 1),
        2,
        reason="preferred leader election",
    ),
    Case(
        "preferred replica alive but not in ISR: leader stays",
        part(0, 2, (1, 2), (2,), 1),
        frozenset({1, 2}),
        None,
    ),
    Case(
        "auto rebalance off: leader stays",
        part(0, 2, (1, 2), (2, 1), 1),
        frozenset({1, 2}),
        None,
        preferred=False,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_next_partition_state(case: Case) -> None:
    change = next_partition_state(
        case.state, case.live, unclean=case.unclean, preferred=case.preferred
    )
    if case.leader is None:
        assert change is None
        return
    assert change is not None
    after, reason = change
    assert (after.leader, after.isr, after.leader_epoch) == (
        case.leader,
        case.isr,
        case.leader_epoch,
    )
    assert after.partition_epoch == case.state.partition_epoch + 1
    assert after.replicas == case.state.replicas
    if case.reason:
        assert reason == case.reason


# -- whole-cluster scenarios ---------------------------------------------------------------------


def test_new_topic_gets_spread_partitions_with_first_replica_leading() -> None:
    snap = snapshot((1, 2, 3), (topic("orders", partitions=6, rf=2),))
    [action] = reconcile(snap)
    assert isinstance(action, CreatePartitions)
    states = action.states
    assert [s.partition for s in states] == list(range(6))
    for s in states:
        assert len(set(s.replicas)) == 2
        assert s.leader == s.replicas[0]
        assert s.isr == s.replicas
        assert (s.leader_epoch, s.partition_epoch) == (0, 0)
    leaders = [s.leader for s in states]
    assert sorted(leaders.count(b) for b in (1, 2, 3)) == [2, 2, 2]


def test_placement_is_deterministic_per_topic_name() -> None:
    record = topic("orders", partitions=4, rf=2)
    brokers = {b: broker(b) for b in (1, 2, 3)}
    assert plan_new_partitions(record, [], brokers) == plan_new_partitions(record, [], brokers)


def test_added_partitions_only_create_the_missing_ones() -> None:
    existing = (part(0, 1, (1,), (1,), name="t"), part(1, 2, (2,), (2,), name="t"))
    snap = snapshot((1, 2, 3), (topic("t", partitions=4),), existing)
    [action] = reconcile(snap)
    assert isinstance(action, CreatePartitions)
    assert [s.partition for s in action.states] == [2, 3]


def test_not_enough_live_brokers_creates_nothing_yet() -> None:
    assert reconcile(snapshot((1,), (topic("t", partitions=2, rf=2),))) == []


def test_partial_creation_after_failover_is_finished() -> None:
    """The previous controller wrote the record and some partitions, then died."""
    snap = snapshot((1, 2), (topic("t", partitions=3),), (part(0, 1, (1,), (1,)),))
    [action] = reconcile(snap)
    assert isinstance(action, CreatePartitions)
    assert [s.partition for s in action.states] == [1, 2]


def test_broker_death_updates_only_affected_partitions() -> None:
    states = (
        part(0, 1, (1, 2), (1, 2)),
        part(1, 2, (2, 3), (2, 3)),
        part(2, 3, (3, 1), (3, 1)),
    )
    snap = snapshot((2, 3), (topic("t", partitions=3, rf=2),), states)
    actions = reconcile(snap)
    assert all(isinstance(a, UpdatePartition) for a in actions)
    changed = {a.before.partition: a.after for a in actions if isinstance(a, UpdatePartition)}
    assert set(changed) == {0, 2}
    assert (changed[0].leader, changed[0].isr) == (2, (2,))
    assert (changed[2].leader, changed[2].isr) == (3, (3,))


def test_unclean_election_is_per_topic() -> None:
    states = (part(0, 1, (1, 2), (1,), name="safe"), part(0, 1, (1, 2), (1,), name="risky"))
    topics = (topic("safe", rf=2), topic("risky", rf=2, unclean=True))
    actions = reconcile(snapshot((2,), topics, states))
    after = {a.after.topic: a.after for a in actions if isinstance(a, UpdatePartition)}
    assert after["safe"].leader == NO_LEADER
    assert after["risky"].leader == 2


def test_deleting_topic_is_removed_without_touching_its_partitions() -> None:
    snap = snapshot((2,), (topic("t", deleting=True),), (part(0, 1, (1,), (1,)),))
    assert reconcile(snap) == [DeleteTopic("t")]


def test_orphan_partitions_are_removed() -> None:
    snap = snapshot((1,), (), (part(0, 1, (1,), (1,), name="gone"),))
    assert reconcile(snap) == [DeleteTopic("gone", orphan=True)]


def test_converged_cluster_needs_nothing() -> None:
    states = (part(0, 1, (1, 2), (1, 2)), part(1, 2, (2, 1), (2, 1)))
    assert reconcile(snapshot((1, 2), (topic("t", partitions=2, rf=2),), states)) == []


# -- controlled shutdown ----------------------------------------------------------------------


def _stopping(snap: ClusterSnapshot, *broker_ids: int) -> ClusterSnapshot:
    brokers = {
        b: r.model_copy(update={"shutting_down": b in broker_ids}) for b, r in snap.brokers.items()
    }
    return ClusterSnapshot(
        revision=snap.revision,
        brokers=MappingProxyType(brokers),
        topics=snap.topics,
        partitions=snap.partitions,
    )


def test_controlled_shutdown_moves_leadership_to_an_in_sync_replica() -> None:
    states = (
        part(0, 1, (1, 2, 3), (1, 2, 3)),  # led by the stopping broker: moves to 2
        part(1, 2, (2, 1, 3), (2, 1, 3)),  # led by another: untouched
        part(2, 1, (1, 3), (1,)),  # no other in-sync replica: keeps its leader
    )
    snap = _stopping(snapshot((1, 2, 3), (topic("t", partitions=3, rf=3),), states), 1)
    actions = [a for a in reconcile(snap) if isinstance(a, UpdatePartition)]
    assert [(a.before.partition, a.after.leader, a.reason) for a in actions] == [
        (0, 2, "controlled shutdown")
    ]
    assert (actions[0].after.leader_epoch, actions[0].after.isr) == (1, (1, 2, 3))


def test_a_stopping_broker_is_not_elected_nor_preferred() -> None:
    # Leader 1 is dead; 2 is stopping: 3 is elected although 2 comes first in replica order.
    dead_leader = part(0, 1, (1, 2, 3), (1, 2, 3), name="a")
    # 2 is the preferred replica but stopping: leadership stays on 3.
    preferred = part(0, 3, (2, 3), (2, 3), name="b")
    topics = (topic("a", rf=3), topic("b", rf=2))
    snap = _stopping(snapshot((2, 3), topics, (dead_leader, preferred)), 2)
    after = {a.after.topic: a.after for a in reconcile(snap) if isinstance(a, UpdatePartition)}
    assert after["a"].leader == 3
    assert "b" not in after


# -- reassignment ---------------------------------------------------------------------------------


def _moving(
    leader: int,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    adding: tuple[int, ...],
    removing: tuple[int, ...],
) -> PartitionState:
    return part(0, leader, replicas, isr).model_copy(
        update={"adding_replicas": adding, "removing_replicas": removing}
    )


def test_reassignment_waits_for_the_new_replicas_to_be_in_sync() -> None:
    # 1 -> 2, 3: target (2, 3), removing 1; only 2 is in sync yet.
    state = _moving(1, (2, 3, 1), (1, 2), adding=(2, 3), removing=(1,))
    assert next_partition_state(state, frozenset({1, 2, 3}), preferred=False) is None


def test_reassignment_completes_and_moves_leadership_into_the_target() -> None:
    state = _moving(1, (2, 3, 1), (1, 2, 3), adding=(2, 3), removing=(1,))
    change = next_partition_state(state, frozenset({1, 2, 3}))
    assert change is not None
    after, reason = change
    assert reason == "reassignment completed"
    assert (after.leader, after.replicas, after.isr) == (2, (2, 3), (2, 3))
    assert (after.adding_replicas, after.removing_replicas) == ((), ())
    assert (after.leader_epoch, after.partition_epoch) == (1, 1)


def test_reassignment_keeping_the_leader_does_not_bump_the_leader_epoch() -> None:
    state = _moving(2, (2, 3, 1), (2, 1, 3), adding=(3,), removing=(1,))
    change = next_partition_state(state, frozenset({1, 2, 3}))
    assert change is not None
    assert (change[0].leader, change[0].leader_epoch, change[0].isr) == (2, 0, (2, 3))


def test_a_leader_outside_the_replicas_is_replaced() -> None:
    # A cancelled move left leader 4, which is no replica any more.
    state = part(0, 4, (1, 2), (1, 2))
    change = next_partition_state(state, frozenset({1, 2, 4}))
    assert change is not None
    assert change[0].leader == 1


def test_controlled_shutdown_keeps_the_leader_when_the_other_isr_members_are_dead() -> None:
    # 2 is in the ISR but dead: it leaves the ISR; 1 keeps leading until it is gone.
    state = part(0, 1, (1, 2, 3), (1, 2))
    change = next_partition_state(state, frozenset({1, 3}), stopping=frozenset({1}))
    assert change is not None
    after, reason = change
    assert (after.leader, after.isr, after.leader_epoch) == (1, (1,), 0)
    assert reason == "dead replica left the ISR"


def test_controlled_shutdown_skips_a_replica_that_is_stopping_too() -> None:
    state = part(0, 1, (1, 2, 3), (1, 2, 3), epoch=4)
    change = next_partition_state(state, frozenset({1, 2, 3}), stopping=frozenset({1, 2}))
    assert change is not None
    after, reason = change
    assert (after.leader, reason) == (3, "controlled shutdown")
    assert (after.leader_epoch, after.partition_epoch) == (5, 5)


def test_preferred_leader_does_not_return_to_a_stopping_broker_once_it_moved() -> None:
    # After the controlled shutdown moved leadership from 1 to 2, nothing moves it back.
    moved = part(0, 2, (1, 2, 3), (1, 2, 3), epoch=1)
    assert next_partition_state(moved, frozenset({1, 2, 3}), stopping=frozenset({1})) is None
    # ...until broker 1 restarts without the flag: then it is preferred again.
    change = next_partition_state(moved, frozenset({1, 2, 3}))
    assert change is not None
    assert (change[0].leader, change[1]) == (1, "preferred leader election")


def test_reassignment_completion_prefers_a_target_replica_that_is_not_stopping() -> None:
    state = _moving(1, (2, 3, 1), (1, 2, 3), adding=(2, 3), removing=(1,))
    change = next_partition_state(state, frozenset({1, 2, 3}), stopping=frozenset({2}))
    assert change is not None
    assert (change[0].leader, change[0].replicas, change[1]) == (
        3,
        (2, 3),
        "reassignment completed",
    )


def test_reassignment_completes_while_a_removed_replica_is_dead() -> None:
    state = _moving(2, (2, 3, 1), (2, 1), adding=(3,), removing=(1,)).model_copy(
        update={"isr": (2, 3, 1)}
    )
    change = next_partition_state(state, frozenset({2, 3}))
    assert change is not None
    assert (change[0].leader, change[0].replicas, change[0].isr) == (2, (2, 3), (2, 3))


def test_a_dead_leader_during_a_reassignment_is_replaced_from_the_isr() -> None:
    # Not complete (4 lags), but leader 1 died: 2 takes over; the move keeps running.
    state = _moving(1, (2, 4, 1), (1, 2), adding=(4,), removing=(1,))
    change = next_partition_state(state, frozenset({2, 4}))
    assert change is not None
    after, reason = change
    assert (after.leader, after.isr, reason) == (2, (2,), "leader election")
    assert (after.adding_replicas, after.removing_replicas) == ((4,), (1,))


def test_a_reassignment_with_an_empty_target_waits_instead_of_failing() -> None:
    state = _moving(1, (1,), (1,), adding=(), removing=(1,))
    assert next_partition_state(state, frozenset({1}), preferred=False) is None


def test_reassignment_actions_come_out_of_reconcile() -> None:
    state = _moving(1, (2, 1), (1, 2), adding=(2,), removing=(1,))
    snap = snapshot((1, 2), (topic("t", rf=1),), (state,))
    (action,) = reconcile(snap)
    assert isinstance(action, UpdatePartition)
    assert (action.after.replicas, action.after.leader, action.reason) == (
        (2,),
        2,
        "reassignment completed",
    )


# -- preferred leader election on request ------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "live", "stopping", "expected"),
    [
        # The preferred replica 1 is back in the ISR: it leads again, epochs bumped.
        (part(0, 2, (1, 2, 3), (1, 2, 3), epoch=3), {1, 2, 3}, set(), 1),
        (part(0, 1, (1, 2, 3), (1, 2, 3)), {1, 2, 3}, set(), "ELECTION_NOT_NEEDED"),
        (part(0, 2, (1, 2, 3), (2, 3)), {1, 2, 3}, set(), "PREFERRED_LEADER_NOT_AVAILABLE"),
        (part(0, 2, (1, 2, 3), (1, 2, 3)), {2, 3}, set(), "PREFERRED_LEADER_NOT_AVAILABLE"),
        (part(0, 2, (1, 2, 3), (1, 2, 3)), {1, 2, 3}, {1}, "PREFERRED_LEADER_NOT_AVAILABLE"),
    ],
    ids=["elected", "already", "out of ISR", "dead", "stopping or draining"],
)
def test_elect_preferred_leader(
    state: PartitionState, live: set[int], stopping: set[int], expected: int | str
) -> None:
    decided = elect_preferred_leader(state, frozenset(live), frozenset(stopping))
    if isinstance(expected, str):
        assert decided == expected
        return
    assert isinstance(decided, PartitionState)
    assert decided.leader == expected
    assert decided.isr == state.isr
    assert (decided.leader_epoch, decided.partition_epoch) == (
        state.leader_epoch + 1,
        state.partition_epoch + 1,
    )


def test_without_auto_rebalance_the_preferred_replica_waits_for_a_request() -> None:
    moved = part(0, 2, (1, 2), (1, 2), epoch=1)
    snap = snapshot((1, 2), (topic("t", rf=2),), (moved,))
    assert reconcile(snap, auto_leader_rebalance=False) == []
    decided = elect_preferred_leader(moved, frozenset({1, 2}))
    assert isinstance(decided, PartitionState)
    assert decided.leader == 1


# -- deciding for the topics a change touched ---------------------------------------------------


def _topic_of(action: CreatePartitions | UpdatePartition | DeleteTopic) -> str:
    return action.before.topic if isinstance(action, UpdatePartition) else action.topic


def test_a_pass_over_some_topics_decides_for_them_as_a_full_pass_does() -> None:
    """Broker 2 died: every kind of action, in several topics, some of them orphaned."""
    snap = snapshot(
        (1, 3),
        (
            topic("dead-leader", 2, rf=3),
            topic("missing", 2, rf=2),  # partition 1 not created yet
            topic("fine", 1, rf=2),
            topic("gone", 1, deleting=True),
        ),
        (
            part(0, 2, (2, 1, 3), (2, 1, 3), name="dead-leader"),
            part(1, 1, (1, 2, 3), (1, 2, 3), name="dead-leader"),
            part(0, 1, (1, 3), (1, 3), name="missing"),
            part(0, 1, (1, 3), (1, 3), name="fine"),
            part(0, 1, (1,), (1,), name="gone"),
            part(0, 3, (3,), (3,), name="orphan"),
        ),
    )
    full = reconcile(snap)
    assert {_topic_of(a) for a in full} == {"dead-leader", "missing", "gone", "orphan"}
    for chosen in ({"dead-leader"}, {"missing", "orphan"}, {"fine"}, {"gone", "unknown"}):
        expected = [a for a in full if _topic_of(a) in chosen]
        assert reconcile(snap, topics=chosen) == expected, chosen
    assert reconcile(snap, topics=set()) == []
    assert reconcile(snap, topics=set(snap.topics) | {"orphan"}) == full


def test_a_pass_over_some_topics_reads_a_cache_snapshot_the_same_way() -> None:
    """The cache's snapshots keep partitions per topic (``PartitionMap``)."""
    states = (part(0, 2, (2, 1), (2, 1), name="a"), part(0, 3, (3,), (3,), name="orphan"))
    snap = snapshot((1,), (topic("a", 1, rf=2),), states)
    shared = ClusterSnapshot(
        revision=snap.revision,
        brokers=snap.brokers,
        topics=snap.topics,
        partitions=PartitionMap({"a": {0: states[0]}, "orphan": {0: states[1]}}),
    )
    assert reconcile(shared) == reconcile(snap)
    assert reconcile(shared, topics={"orphan"}) == [DeleteTopic("orphan", orphan=True)]


# -- a failed data folder (KIP-112) ------------------------------------------------------------


def _disk_failed(snap: ClusterSnapshot, *broker_ids: int) -> ClusterSnapshot:
    brokers = {
        b: r.model_copy(update={"offline_log_dirs": ("dir",) if b in broker_ids else ()})
        for b, r in snap.brokers.items()
    }
    return ClusterSnapshot(
        revision=snap.revision,
        brokers=MappingProxyType(brokers),
        topics=snap.topics,
        partitions=snap.partitions,
    )


def test_a_broker_with_an_offline_folder_gives_up_leadership_and_leaves_the_isrs() -> None:
    states = (
        part(0, 1, (1, 2, 3), (1, 2, 3)),  # led by the failed broker: moves to 2
        part(1, 2, (2, 1, 3), (2, 1, 3)),  # followed by it: it leaves the ISR
        part(2, 1, (1,), (1,)),  # its only replica: offline until it is back
    )
    topics = (topic("t", partitions=3, rf=3),)
    snap = _disk_failed(snapshot((1, 2, 3), topics, states), 1)
    after = {a.before.partition: a.after for a in reconcile(snap) if isinstance(a, UpdatePartition)}
    assert (after[0].leader, after[0].isr, after[0].leader_epoch) == (2, (2, 3), 1)
    assert (after[1].leader, after[1].isr) == (2, (2, 3))
    assert (after[2].leader, after[2].isr) == (NO_LEADER, (1,))
    # The mark cleared: the leaderless partition elects it again; the others wait for the
    # leaders to add it back once caught up.
    back = snapshot((1, 2, 3), topics, tuple(after[p] for p in range(3)))
    again = {a.before.partition: a.after for a in reconcile(back) if isinstance(a, UpdatePartition)}
    assert set(again) == {2}
    assert again[2].leader == 1


def test_a_broker_with_an_offline_folder_gets_no_new_partitions() -> None:
    snap = _disk_failed(snapshot((1, 2, 3), (topic("n", partitions=6, rf=2),)), 3)
    [created] = [a for a in reconcile(snap) if isinstance(a, CreatePartitions)]
    assert all(3 not in s.replicas for s in created.states)


def test_reconcile_steps_cut_at_whole_topics_and_end_with_the_cluster_wide_actions() -> None:
    topics = tuple(topic(f"t{i}", partitions=3, rf=1) for i in range(5))
    orphan = part(0, 1, (1,), (1,), name="gone")
    s = snapshot((1,), topics, (orphan,))
    steps = list(reconcile_steps(s, step_partitions=6))
    assert [[a.topic for a in step] for step in steps] == [  # type: ignore[union-attr]
        ["t0", "t1"],
        ["t2", "t3"],
        ["t4", "gone"],
    ]
    assert isinstance(steps[-1][-1], DeleteTopic)
    assert steps[-1][-1].orphan
    assert [a for step in steps for a in step] == reconcile(s)
