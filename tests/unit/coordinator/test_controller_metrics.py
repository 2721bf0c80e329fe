"""The coordinator's metrics: election kinds, and partition health gauges from the snapshot."""

from __future__ import annotations

from types import MappingProxyType

from prometheus_client import CollectorRegistry

from yak.metadata.models import NO_LEADER, BrokerRegistration, PartitionState, TopicRecord
from yak.metadata.snapshot import ClusterSnapshot
from yak_coordinator.decisions.partition_health import (
    HealthCounter,
    HealthCounts,
    HealthFilter,
    health_counts,
    partition_health,
)
from yak_coordinator.decisions.partition_plan import next_partition_state
from yak_coordinator.metrics import ControllerCollector, ControllerStats, election_kind


def _part(p: int, leader: int, isr: tuple[int, ...], replicas=(0, 1, 2)) -> PartitionState:
    return PartitionState(
        topic="t", partition=p, leader=leader, leader_epoch=0, partition_epoch=0,
        replicas=replicas, isr=isr,
    )  # fmt: skip


def _snapshot(*states: PartitionState) -> ClusterSnapshot:
    record = TopicRecord(
        name="t", topic_id="id", partitions=len(states), replication_factor=3,
        configs={"min.insync.replicas": "2"}, created_at_ms=1,
    )  # fmt: skip
    brokers = {
        b: BrokerRegistration(broker_id=b, host="h", port=1, started_at_ms=1) for b in (0, 1)
    }
    return ClusterSnapshot(
        revision=3,
        brokers=MappingProxyType(brokers),
        topics=MappingProxyType({"t": record}),
        partitions=MappingProxyType({(s.topic, s.partition): s for s in states}),
    )


def test_election_kinds_follow_the_reconcile_reasons() -> None:
    before = _part(0, 2, (2, 1))
    change = next_partition_state(before, frozenset({0, 1}))
    assert change is not None
    assert election_kind(before, *change) == "clean"
    lost = _part(0, 2, (2,))
    unclean = next_partition_state(lost, frozenset({0, 1}), unclean=True)
    assert unclean is not None
    assert election_kind(lost, *unclean) == "unclean"
    offline = next_partition_state(lost, frozenset({0, 1}))
    assert offline is None or election_kind(lost, *offline) is None
    back = _part(0, 1, (0, 1, 2))
    preferred = next_partition_state(back, frozenset({0, 1, 2}))
    assert preferred is not None
    assert election_kind(back, *preferred) == "preferred"
    shrink = _part(0, 0, (0, 1, 2))
    assert election_kind(shrink, _part(0, 0, (0, 1)), "dead replica left the ISR") is None
    assert election_kind(shrink, _part(0, NO_LEADER, (0,)), "no in-sync replica alive") is None
    assert election_kind(shrink, _part(0, 1, (1,)), "reassignment completed") == "other"


def test_elections_are_counted_by_kind_and_every_kind_starts_at_zero() -> None:
    registry = CollectorRegistry()
    stats = ControllerStats(registry)
    stats.on_partition_written(_part(0, 2, (2, 1)), _part(0, 1, (1,)), "leader election")
    name = "yak_coordinator_leader_elections_total"
    assert registry.get_sample_value(name, {"kind": "clean"}) == 1
    assert registry.get_sample_value(name, {"kind": "unclean"}) == 0


def test_health_gauges_come_from_the_active_controllers_snapshot() -> None:
    snapshot = _snapshot(_part(0, 0, (0, 1, 2)), _part(1, 0, (0, 1)), _part(2, NO_LEADER, (2,)))
    active = True
    registry = CollectorRegistry()
    registry.register(ControllerCollector(lambda: active, lambda: snapshot))

    def value(name: str) -> float | None:
        return registry.get_sample_value(f"yak_coordinator_{name}")

    assert value("active_controller") == 1
    assert value("offline_partitions") == 1
    assert value("under_replicated_partitions") == 2
    assert value("under_min_isr_partitions") == 1
    assert value("brokers") == 2
    active = False
    assert value("active_controller") == 0
    assert value("offline_partitions") == 0
    assert value("under_replicated_partitions") == 0


def test_health_counts_agree_with_the_listed_partitions() -> None:
    snapshot = _snapshot(
        _part(0, 0, (0, 1, 2)), _part(1, 0, (0, 1)), _part(2, NO_LEADER, (2,)), _part(3, 1, (1,))
    )
    orphan = PartitionState(topic="gone", partition=0, leader=NO_LEADER, replicas=(0,), isr=(0,))
    snapshot = ClusterSnapshot(
        revision=4,
        brokers=snapshot.brokers,
        topics=snapshot.topics,
        partitions={**snapshot.partitions, ("gone", 0): orphan},  # no record: not counted
    )
    counts = health_counts(snapshot)
    assert counts == HealthCounts(
        offline=len(partition_health(snapshot, HealthFilter.OFFLINE)),
        under_replicated=len(partition_health(snapshot, HealthFilter.UNDER_REPLICATED)),
        under_min_isr=len(partition_health(snapshot, HealthFilter.UNDER_MIN_ISR)),
    )
    assert counts == HealthCounts(offline=1, under_replicated=3, under_min_isr=2)
    assert len(partition_health(snapshot, HealthFilter.UNHEALTHY)) == 3
    assert len(partition_health(snapshot, HealthFilter.ALL)) == 4


def test_health_counter_counts_a_snapshot_once() -> None:
    counter = HealthCounter()
    first = _snapshot(_part(0, 0, (0, 1)))
    registry = CollectorRegistry()
    registry.register(ControllerCollector(lambda: True, lambda: first, counter))
    assert counter(first) == HealthCounts(under_replicated=1)
    for _ in range(3):
        assert registry.get_sample_value("yak_coordinator_under_replicated_partitions") == 1
    assert counter.counted == 1  # the metrics scraped three times: the same snapshot
    assert counter(_snapshot(_part(0, 0, (0, 1, 2)))) == HealthCounts()
    assert counter.counted == 2
