"""The coordinator's metrics: what Kafka operators watch on the controller.

- ``yak_coordinator_active_controller`` (gauge, 1/0): whether this coordinator holds the
  controller lease (Kafka's ``ActiveControllerCount``: the sum over coordinators must be 1);
- ``yak_coordinator_leader_elections_total{kind}`` (counter): leader changes this coordinator
  wrote as the active controller, by kind: ``clean`` (leader lost, an in-sync replica
  elected), ``unclean`` (no in-sync replica alive, ``unclean.leader.election.enable``),
  ``preferred`` (leadership moved back to the preferred replica), ``controlled_shutdown``,
  ``other`` (e.g. a completed reassignment moved it);
- ``yak_coordinator_offline_partitions``, ``..._under_replicated_partitions``,
  ``..._under_min_isr_partitions`` (gauges) from the metadata snapshot at scrape time, the
  rules of ``partition_health``; reported by the active controller only (0 on standbys), as
  Kafka does, so that a sum over coordinators counts each partition once;
- ``yak_coordinator_brokers`` (gauge): registered brokers in the snapshot (active only).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from yak.metadata.models import NO_LEADER, PartitionState
from yak.metadata.snapshot import ClusterSnapshot
from yak_coordinator.decisions.partition_health import HealthCounts, health_counts

__all__ = ["ControllerCollector", "ControllerStats", "election_kind"]

_KINDS = {
    "leader election": "clean",
    "unclean leader election": "unclean",
    "preferred leader election": "preferred",
    "controlled shutdown": "controlled_shutdown",
}


def election_kind(before: PartitionState, after: PartitionState, reason: str) -> str | None:
    """The kind of leader election a partition change is, or None if the leader stayed (or
    none could be elected)."""
    if after.leader == before.leader or after.leader == NO_LEADER:
        return None
    return _KINDS.get(reason, "other")


class ControllerStats:
    """Counters the active controller updates when it writes a decision."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.leader_elections = Counter(
            "yak_coordinator_leader_elections",
            "Leader changes written by this coordinator as the active controller, by kind.",
            ["kind"],
            registry=registry if registry is not None else CollectorRegistry(),
        )
        for kind in (*_KINDS.values(), "other"):
            self.leader_elections.labels(kind)  # every kind exported from the start, at 0

    def on_partition_written(
        self, before: PartitionState, after: PartitionState, reason: str
    ) -> None:
        kind = election_kind(before, after, reason)
        if kind is not None:
            self.leader_elections.labels(kind).inc()


class ControllerCollector(Collector):
    """Gauges from the metadata snapshot at scrape time (see the module doc)."""

    def __init__(
        self,
        is_controller: Callable[[], bool],
        snapshot: Callable[[], ClusterSnapshot | None],
        counts: Callable[[ClusterSnapshot], HealthCounts] = health_counts,
    ) -> None:
        self._is_controller = is_controller
        self._snapshot = snapshot
        self._counts = counts

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())  # unchecked: values are computed at scrape time

    def collect(self) -> Iterator[GaugeMetricFamily]:
        active = self._is_controller()
        snapshot = self._snapshot() if active else None
        brokers, counts = 0, HealthCounts()
        if snapshot is not None:
            brokers, counts = len(snapshot.brokers), self._counts(snapshot)
        offline, under_replicated, under_min_isr = counts
        for name, doc, value in (
            (
                "yak_coordinator_active_controller",
                "1 if this coordinator is the active controller, else 0.",
                int(active),
            ),
            (
                "yak_coordinator_offline_partitions",
                "Partitions without a leader (active controller only).",
                offline,
            ),
            (
                "yak_coordinator_under_replicated_partitions",
                "Partitions whose ISR is smaller than their replica list (active controller only).",
                under_replicated,
            ),
            (
                "yak_coordinator_under_min_isr_partitions",
                "Partitions with an ISR below min.insync.replicas (active controller only).",
                under_min_isr,
            ),
            (
                "yak_coordinator_brokers",
                "Registered brokers in the metadata (active controller only).",
                brokers,
            ),
        ):
            yield GaugeMetricFamily(name, doc, value=value)
