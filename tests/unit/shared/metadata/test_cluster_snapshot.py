"""``ClusterSnapshot`` and ``PartitionMap``: the metadata as a value, read by topic."""

from __future__ import annotations

import pytest

from yak.metadata.models import PartitionState
from yak.metadata.snapshot import ClusterSnapshot, PartitionMap


def state(name: str, p: int, leader: int = 1) -> PartitionState:
    return PartitionState(topic=name, partition=p, leader=leader, replicas=(leader,), isr=(leader,))


def test_partition_map_is_a_read_only_mapping_by_topic_and_partition() -> None:
    states = PartitionMap({"a": {1: state("a", 1), 0: state("a", 0)}, "b": {0: state("b", 0)}})
    assert len(states) == 3
    assert states[("a", 1)] == state("a", 1)
    assert ("b", 0) in states
    assert ("b", 1) not in states
    assert ("c", 0) not in states
    assert "a" not in states  # type: ignore[comparison-overlap]  # not a key shape: no error
    with pytest.raises(KeyError):
        states[("c", 0)]
    assert sorted(states) == [("a", 0), ("a", 1), ("b", 0)]
    assert dict(states.of("a")) == {1: state("a", 1), 0: state("a", 0)}
    assert dict(states.of("missing")) == {}
    assert states == {(s.topic, s.partition): s for s in states.values()}


def test_partitions_of_each_topic_in_partition_order() -> None:
    states = [
        state("b", 1, 1),
        state("a", 2, 1),
        state("b", 0, 2),
        state("a", 0, 3),
    ]
    snap = ClusterSnapshot(revision=1, partitions={(s.topic, s.partition): s for s in states})
    assert [s.partition for s in snap.partitions_of("a")] == [0, 2]
    assert [(s.partition, s.leader) for s in snap.partitions_of("b")] == [(0, 2), (1, 1)]
    assert snap.partitions_of("missing") == []
    snap.partitions_of("a").clear()  # a copy: the snapshot stays as it was
    assert len(snap.partitions_of("a")) == 2
    assert snap == ClusterSnapshot(revision=1, partitions=dict(snap.partitions))
