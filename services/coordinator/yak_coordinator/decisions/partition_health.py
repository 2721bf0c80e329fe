"""Which partitions need attention: offline, under-replicated, under min ISR (pure).

Kafka's operators watch ``OfflinePartitionsCount`` and ``UnderReplicatedPartitions``; the admin
API lists the partitions behind those numbers. A partition is

- **offline** when it has no leader (no in-sync replica alive, or never elected);
- **under-replicated** when its ISR is smaller than its replica list — during a reassignment,
  the replica list without the replicas being added (Kafka's rule: a move in progress is not
  by itself under-replicated);
- **under min ISR** when its ISR is smaller than the topic's ``min.insync.replicas`` — acks=all
  writes are refused with NOT_ENOUGH_REPLICAS until a replica catches up.

``health_counts`` counts the three without building a model per partition; a
``HealthCounter`` keeps the counts of the last snapshot it was asked about, so the cluster
overview and the metrics cost nothing more while the metadata does not change (the console
asks for the overview every 2 s).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import StrEnum
from typing import NamedTuple

from yak.api.admin import PartitionHealth
from yak.metadata.models import PartitionState
from yak.metadata.snapshot import ClusterSnapshot
from yak.topic_config import MIN_INSYNC_REPLICAS

__all__ = ["HealthCounter", "HealthCounts", "HealthFilter", "health_counts", "partition_health"]


class HealthFilter(StrEnum):
    ALL = "all"
    OFFLINE = "offline"
    UNDER_REPLICATED = "under-replicated"
    UNDER_MIN_ISR = "under-min-isr"
    UNHEALTHY = "unhealthy"  # any of the three


def _min_insync(configs: Mapping[str, str]) -> int:
    try:
        return max(int(configs.get(MIN_INSYNC_REPLICAS, "1")), 1)
    except ValueError:
        return 1


class HealthCounts(NamedTuple):
    """How many partitions of live topics are offline, under-replicated, under min ISR."""

    offline: int = 0
    under_replicated: int = 0
    under_min_isr: int = 0


class _Flags(NamedTuple):
    min_isr: int
    offline: bool
    under_replicated: bool
    under_min_isr: bool

    def match(self, which: HealthFilter) -> bool:
        if which is HealthFilter.ALL:
            return True
        if which is HealthFilter.OFFLINE:
            return self.offline
        if which is HealthFilter.UNDER_REPLICATED:
            return self.under_replicated
        if which is HealthFilter.UNDER_MIN_ISR:
            return self.under_min_isr
        return self.offline or self.under_replicated or self.under_min_isr


def _flagged(
    snapshot: ClusterSnapshot, states: Iterator[tuple[tuple[str, int], PartitionState]]
) -> Iterator[tuple[PartitionState, _Flags]]:
    """Each state of a live topic with its flags (a topic's min ISR is parsed once)."""
    min_isr: dict[str, int | None] = {}  # None: no live topic
    for (topic, _), state in states:
        if topic not in min_isr:
            record = snapshot.topics.get(topic)
            live = record is not None and not record.deleting
            min_isr[topic] = _min_insync(record.configs) if record and live else None
        wanted = min_isr[topic]
        if wanted is None:
            continue
        isr = len(state.isr)
        yield (
            state,
            _Flags(wanted, not state.has_leader, isr < len(state.original_replicas), isr < wanted),
        )


def health_counts(snapshot: ClusterSnapshot) -> HealthCounts:
    """The partitions of live topics that are offline, under-replicated, under min ISR."""
    offline = under_replicated = under_min_isr = 0
    for _, flags in _flagged(snapshot, iter(snapshot.partitions.items())):
        offline += flags.offline
        under_replicated += flags.under_replicated
        under_min_isr += flags.under_min_isr
    return HealthCounts(offline, under_replicated, under_min_isr)


class HealthCounter:
    """``health_counts`` of the last snapshot asked about, counted again only for another one
    (the cache hands out the same snapshot until the metadata changes)."""

    def __init__(self) -> None:
        self._snapshot: ClusterSnapshot | None = None
        self._counts = HealthCounts()
        #: Snapshots counted (for tests and tools).
        self.counted = 0

    def __call__(self, snapshot: ClusterSnapshot) -> HealthCounts:
        if snapshot is not self._snapshot:
            self._counts = health_counts(snapshot)
            self._snapshot = snapshot
            self.counted += 1
        return self._counts


def partition_health(snapshot: ClusterSnapshot, which: HealthFilter) -> list[PartitionHealth]:
    """The partitions of live topics matching ``which``, sorted by topic and partition."""
    return [
        PartitionHealth(
            topic=state.topic,
            partition=state.partition,
            leader=state.leader,
            replicas=list(state.replicas),
            isr=list(state.isr),
            min_insync_replicas=flags.min_isr,
            offline=flags.offline,
            under_replicated=flags.under_replicated,
            under_min_isr=flags.under_min_isr,
        )
        for state, flags in _flagged(snapshot, iter(sorted(snapshot.partitions.items())))
        if flags.match(which)
    ]
