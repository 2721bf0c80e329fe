"""The proxy's partitioners for keyless records, one per strategy, chosen by name.

``sticky`` (the default, ``YAK_PARTITIONER``), ``round_robin`` and ``load_aware``
(``yak.partitioner``); a native produce request may name one (``?partitioner=``). Each is
built once per proxy and keeps its per-topic state (the sticky partition, the round-robin
counter) across requests, as a Kafka producer's partitioner does.

``load_aware`` reads the partitions' leaders and the brokers' load samples from the proxy's
metadata cache (``SnapshotLoad``): the samples ride in the brokers' registrations, which the
cache already follows, so choosing costs no request and no etcd read. It reads them once per
batch (when the sticky partition changes), not per record.

Single event loop, like the producer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from yak.clock import Clock
from yak.metadata.cache import MetadataCache
from yak.partitioner import (
    NO_LEADER,
    LoadAwarePartitioner,
    LoadSample,
    Partitioner,
    PartitionerName,
    RoundRobinPartitioner,
    StickyPartitioner,
)

__all__ = ["Partitioners", "SnapshotLoad"]


class SnapshotLoad:
    """``yak.partitioner.ClusterLoad`` over the metadata cache's latest snapshot."""

    def __init__(self, cache: MetadataCache, clock: Clock) -> None:
        self._cache = cache
        self._clock = clock

    def leaders(self, topic: str, num_partitions: int) -> Sequence[int]:
        partitions = self._cache.snapshot.partitions
        leaders = []
        for partition in range(num_partitions):
            state = partitions.get((topic, partition))
            leaders.append(NO_LEADER if state is None else state.leader)
        return leaders

    def loads(self) -> Mapping[int, LoadSample | None]:
        return {b: r.load for b, r in self._cache.snapshot.brokers.items()}

    def now_ms(self) -> int:
        return self._clock.time_ms()


class Partitioners:
    """One partitioner per strategy (see the module doc)."""

    def __init__(self, cache: MetadataCache, clock: Clock) -> None:
        self._by_name: dict[PartitionerName, Partitioner] = {
            "sticky": StickyPartitioner(),
            "round_robin": RoundRobinPartitioner(),
            "load_aware": LoadAwarePartitioner(SnapshotLoad(cache, clock)),
        }

    def get(self, name: PartitionerName) -> Partitioner:
        return self._by_name[name]
