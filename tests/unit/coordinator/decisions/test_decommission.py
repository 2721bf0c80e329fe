"""Broker decommission as scenario tables: snapshot with ``decommissions`` in, moves out
(decommission.py, and how reconcile.py uses it)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from yak.metadata.models import BrokerDecommission, BrokerRegistration, PartitionState, TopicRecord
from yak.metadata.snapshot import ClusterSnapshot
from yak_coordinator.decisions.decommission import drain_moves, drain_progress
from yak_coordinator.decisions.partition_plan import (
    UpdatePartition,
    elect_preferred_leader,
    reconcile,
)


def _broker(broker_id: int, rack: str | None = None) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=broker_id, host="127.0.0.1", port=9000 + broker_id, rack=rack, started_at_ms=1
    )


def _topic(name: str = "t", partitions: int = 1, rf: int = 2) -> TopicRecord:
    return TopicRecord(
        name=name,
        topic_id=f"id-{name}",
        partitions=partitions,
        replication_factor=rf,
        created_at_ms=1,
    )


def _part(
    p: int, leader: int, replicas: tuple[int, ...], isr: tuple[int, ...] | None = None
) -> PartitionState:
    isr = replicas if isr is None else isr
    return PartitionState(topic="t", partition=p, leader=leader, replicas=replicas, isr=isr)


def _snapshot(
    brokers: Mapping[int, str | None],
    partitions: tuple[PartitionState, ...],
    draining: tuple[int, ...] = (),
    topics: tuple[TopicRecord, ...] | None = None,
) -> ClusterSnapshot:
    topics = topics if topics is not None else (_topic(partitions=len(partitions)),)
    return ClusterSnapshot(
        revision=7,
        brokers=MappingProxyType({b: _broker(b, rack) for b, rack in brokers.items()}),
        topics=MappingProxyType({t.name: t for t in topics}),
        partitions=MappingProxyType({(s.topic, s.partition): s for s in partitions}),
        decommissions=MappingProxyType(
            {b: BrokerDecommission(broker_id=b, requested_at_ms=1) for b in draining}
        ),
    )


def test_a_draining_replica_is_replaced_in_place_by_the_emptiest_broker() -> None:
    states = (_part(0, 1, (2, 1)), _part(1, 1, (1, 3)), _part(2, 3, (3, 4)))
    snap = _snapshot({1: None, 2: None, 3: None, 4: None}, states, draining=(2,))
    ((before, after),) = drain_moves(snap)
    assert before == states[0]
    # 3 and 4 are not replicas of t-0; 4 holds one replica, 3 two: 4 takes 2's place.
    assert after.replicas == (4, 1, 2)
    assert (after.adding_replicas, after.removing_replicas) == ((4,), (2,))
    assert after.partition_epoch == before.partition_epoch + 1


def test_racks_stay_spread() -> None:
    states = (_part(0, 1, (1, 2)),)
    racks = {1: "a", 2: "b", 3: "a", 4: "b"}
    ((_, after),) = drain_moves(_snapshot(racks, states, draining=(2,)))
    assert after.replicas[:2] == (1, 4)  # 3 is emptier by id but in rack a, like 1


def test_shutting_down_and_draining_brokers_get_no_replica() -> None:
    states = (_part(0, 1, (1, 2)), _part(1, 1, (1, 3)))
    snap = _snapshot({1: None, 2: None, 3: None, 4: None}, states, draining=(2, 3))
    brokers = dict(snap.brokers)
    brokers[4] = brokers[4].model_copy(update={"shutting_down": True})
    snap = ClusterSnapshot(
        revision=7,
        brokers=MappingProxyType(brokers),
        topics=snap.topics,
        partitions=snap.partitions,
        decommissions=snap.decommissions,
    )
    assert drain_moves(snap) == []
    progress = drain_progress(snap, 2)
    assert progress.blocked == ("t-0: not enough brokers: needs 1 more outside [1, 2]",)
    assert not progress.done


def test_at_most_max_moves_run_at_once_counting_other_moves() -> None:
    moving = _part(0, 1, (1, 4, 3), (1, 3)).model_copy(
        update={"adding_replicas": (4,), "removing_replicas": (3,)}
    )
    states = (moving, *(_part(p, 1, (1, 2)) for p in range(1, 5)))
    snap = _snapshot({1: None, 2: None, 3: None, 4: None}, states, draining=(2,))
    assert len(drain_moves(snap, max_moves=10)) == 4
    moves = drain_moves(snap, max_moves=3)
    assert [before.partition for before, _ in moves] == [1, 2]
    # The load of one round's picks counts for the next pick: 3 and 4 alternate.
    assert [after.replicas[1] for _, after in moves] == [3, 4]


def test_a_dead_draining_broker_is_replaced_too_but_not_an_offline_partition() -> None:
    states = (_part(0, 1, (1, 2), (1,)), _part(1, -1, (2, 3), (2,)))
    snap = _snapshot({1: None, 3: None}, states, draining=(2,))
    ((before, after),) = drain_moves(snap)
    assert before.partition == 0
    assert after.replicas == (1, 3, 2)
    progress = drain_progress(snap, 2)
    assert (progress.alive, progress.replicas, progress.leaders) == (False, 2, 0)
    assert progress.blocked == ("t-1: offline: no leader to copy from",)


def test_progress_counts_leaders_replicas_and_moves() -> None:
    moving = _part(0, 2, (1, 3, 2), (2, 1)).model_copy(
        update={"adding_replicas": (3,), "removing_replicas": (2,)}
    )
    snap = _snapshot({1: None, 2: None, 3: None}, (moving, _part(1, 1, (1, 3))), draining=(2,))
    progress = drain_progress(snap, 2)
    assert (progress.leaders, progress.replicas, progress.moving, progress.blocked) == (1, 1, 1, ())
    empty = drain_progress(_snapshot({1: None, 3: None}, (_part(0, 1, (1, 3)),), (2,)), 2)
    assert empty.done


def test_reconcile_moves_leadership_first_then_the_replicas() -> None:
    states = (_part(0, 2, (2, 1)),)
    snap = _snapshot({1: None, 2: None, 3: None}, states, draining=(2,))
    (action,) = reconcile(snap)
    assert isinstance(action, UpdatePartition)
    assert (action.after.leader, action.reason) == (1, "controlled shutdown")
    assert not action.after.reassigning  # one write per partition and round
    moved = _snapshot({1: None, 2: None, 3: None}, (action.after,), draining=(2,))
    (action,) = reconcile(moved)
    assert isinstance(action, UpdatePartition)
    assert action.reason == "decommission: moving replicas off"
    assert (action.after.replicas, action.after.leader) == ((3, 1, 2), 1)
    # The new replica catches up: the move completes and 2 is gone.
    caught_up = action.after.model_copy(update={"isr": (1, 2, 3)})
    (action,) = reconcile(_snapshot({1: None, 2: None, 3: None}, (caught_up,), draining=(2,)))
    assert isinstance(action, UpdatePartition)
    assert (action.after.replicas, action.after.isr) == ((3, 1), (1, 3))
    assert action.reason == "reassignment completed"
    # Recommission changes nothing back; preferred leader 3 gets leadership once in sync.
    (action,) = reconcile(_snapshot({1: None, 2: None, 3: None}, (action.after,)))
    assert isinstance(action, UpdatePartition)
    assert (action.after.leader, action.reason) == (3, "preferred leader election")


def test_new_partitions_are_not_placed_on_draining_brokers() -> None:
    snap = _snapshot({1: None, 2: None, 3: None}, (), draining=(2,), topics=(_topic(partitions=4),))
    (create,) = reconcile(snap)
    states = getattr(create, "states", ())
    assert len(states) == 4
    assert all(2 not in s.replicas for s in states)


def test_a_draining_broker_is_not_the_preferred_leader_on_request() -> None:
    state = _part(0, 1, (2, 1))
    assert elect_preferred_leader(state, frozenset({1, 2}), frozenset({2})) == (
        "PREFERRED_LEADER_NOT_AVAILABLE"
    )
