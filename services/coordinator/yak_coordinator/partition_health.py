"""Which partitions need attention: offline, under-replicated, under min ISR (pure).

Kafka's operators watch ``OfflinePartitionsCount`` and ``UnderReplicatedPartitions``; the admin
API lists the partitions behind those numbers. A partition is

- **offline** when it has no leader (no in-sync replica alive, or never elected);
- **under-replicated** when its ISR is smaller than its replica list — during a reassignment,
  the replica list without the replicas being added (Kafka's rule: a move in progress is not
  by itself under-replicated);
- **under min ISR** when its ISR is smaller than the topic's ``min.insync.replicas`` — acks=all
  writes are refused with NOT_ENOUGH_REPLICAS until a replica catches up.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from yak.api.admin import PartitionHealth
from yak.metadata.cache import ClusterSnapshot
from yak.topic_config import MIN_INSYNC_REPLICAS

__all__ = ["HealthFilter", "partition_health"]


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


def partition_health(snapshot: ClusterSnapshot, which: HealthFilter) -> list[PartitionHealth]:
    """The partitions of live topics matching ``which``, sorted by topic and partition."""
    out = []
    for (topic, partition), state in sorted(snapshot.partitions.items()):
        record = snapshot.topics.get(topic)
        if record is None or record.deleting:
            continue
        min_isr = _min_insync(record.configs)
        health = PartitionHealth(
            topic=topic,
            partition=partition,
            leader=state.leader,
            replicas=list(state.replicas),
            isr=list(state.isr),
            min_insync_replicas=min_isr,
            offline=not state.has_leader,
            under_replicated=len(state.isr) < len(state.original_replicas),
            under_min_isr=len(state.isr) < min_isr,
        )
        flags = {
            HealthFilter.ALL: True,
            HealthFilter.OFFLINE: health.offline,
            HealthFilter.UNDER_REPLICATED: health.under_replicated,
            HealthFilter.UNDER_MIN_ISR: health.under_min_isr,
            HealthFilter.UNHEALTHY: health.offline
            or health.under_replicated
            or health.under_min_isr,
        }
        if flags[which]:
            out.append(health)
    return out
