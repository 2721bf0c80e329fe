from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from yak.errors import InvalidPartitionsError, InvalidReplicationFactorError
from yak_coordinator.decisions.placement import BrokerSlot, assign_replicas


def brokers(n: int, racks: int = 0) -> list[BrokerSlot]:
    return [BrokerSlot(i, f"r{i % racks}" if racks else None) for i in range(n)]


def test_replica_sets_are_distinct_brokers_and_leaders_round_robin() -> None:
    assignment = assign_replicas(brokers(3), partitions=6, replication_factor=2)
    assert [replicas[0] for replicas in assignment] == [0, 1, 2, 0, 1, 2]
    assert all(len(set(replicas)) == 2 for replicas in assignment)


@given(
    n=st.integers(1, 9),
    partitions=st.integers(1, 60),
    data=st.data(),
)
def test_leaders_and_replicas_are_spread_evenly(
    n: int, partitions: int, data: st.DataObject
) -> None:
    rf = data.draw(st.integers(1, n))
    start = data.draw(st.integers(0, 20))
    assignment = assign_replicas(brokers(n), partitions, rf, start_index=start)
    assert len(assignment) == partitions
    assert all(len(replicas) == rf and len(set(replicas)) == rf for replicas in assignment)
    leaders = Counter(replicas[0] for replicas in assignment)
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in range(n)) <= 1
    load = Counter(b for replicas in assignment for b in replicas)
    assert max(load.values()) - min(load.get(b, 0) for b in range(n)) <= rf


@given(n=st.integers(2, 9), racks=st.integers(2, 4), partitions=st.integers(1, 30), data=st.data())
def test_replicas_land_on_distinct_racks_when_there_are_enough(
    n: int, racks: int, partitions: int, data: st.DataObject
) -> None:
    racks = min(racks, n)
    slots = brokers(n, racks)
    rack_of = {s.broker_id: s.rack for s in slots}
    rf = data.draw(st.integers(1, n))
    for replicas in assign_replicas(slots, partitions, rf):
        distinct_racks = {rack_of[b] for b in replicas}
        assert len(distinct_racks) == min(rf, racks)


def test_followers_of_one_leader_are_spread_over_the_others() -> None:
    assignment = assign_replicas(brokers(4), partitions=12, replication_factor=2)
    followers_of_0 = {replicas[1] for replicas in assignment if replicas[0] == 0}
    assert len(followers_of_0) == 3


def test_added_partitions_continue_the_pattern() -> None:
    whole = assign_replicas(brokers(3), partitions=5, replication_factor=2)
    head = assign_replicas(brokers(3), partitions=3, replication_factor=2)
    tail = assign_replicas(brokers(3), partitions=2, replication_factor=2, first_partition=3)
    assert head + tail == whole


def test_invalid_counts_are_refused_with_kafka_errors() -> None:
    with pytest.raises(InvalidReplicationFactorError, match="larger than the number"):
        assign_replicas(brokers(2), partitions=1, replication_factor=3)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(brokers(2), partitions=1, replication_factor=0)
    with pytest.raises(InvalidPartitionsError):
        assign_replicas(brokers(2), partitions=0, replication_factor=1)
