"""``ClusterSnapshot``: the cluster metadata as of one etcd revision, an immutable value.

The ``MetadataCache`` (``yak.metadata.cache``) builds one after each change it applied;
decisions (the coordinator's partition plan, the broker's replica plan, health counts) take
one as their input. This module holds the value only: it imports the metadata models and the
standard library, no store, no clock, no asyncio, so a pure module can name it.

``PartitionMap`` keeps partition states per topic: ``of(topic)`` gives one topic's states
without walking the others. The per-topic mappings are shared with the cache that built the
map, which never changes a mapping it has handed out (it copies a topic's states before
changing them), so a snapshot costs the number of topics, not of partitions.

Immutable once built (``partitions_of`` fills a lazy index on its first call, synchronously:
a cache, not state); safe to share between readers of one event loop.
"""

from __future__ import annotations

from collections.abc import Iterator, KeysView, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from yak.metadata.models import (
    BrokerDecommission,
    BrokerRecord,
    BrokerRegistration,
    ControllerRecord,
    PartitionState,
    ShareGroupRecord,
    TopicRecord,
)

__all__ = ["ClusterSnapshot", "PartitionMap"]


class PartitionMap(Mapping[tuple[str, int], PartitionState]):
    """Partition states by ``(topic, partition)``, stored per topic (read-only).

    ``of(topic)`` gives one topic's states without walking the others; ``len`` is counted once.
    The per-topic mappings are shared with the ``MetadataCache`` that built the map, which
    never changes a mapping it has handed out (it copies a topic's states before changing them).
    """

    __slots__ = ("_by_topic", "_len")

    def __init__(self, by_topic: Mapping[str, Mapping[int, PartitionState]]) -> None:
        self._by_topic = by_topic
        self._len = sum(len(states) for states in by_topic.values())

    def of(self, topic: str) -> Mapping[int, PartitionState]:
        """The states of ``topic`` by partition number (empty if it has none)."""
        return self._by_topic.get(topic, _NO_STATES)

    def topics(self) -> KeysView[str]:
        """The topics that have partition states."""
        return self._by_topic.keys()

    def __getitem__(self, key: tuple[str, int]) -> PartitionState:
        topic, partition = key
        return self._by_topic.get(topic, _NO_STATES)[partition]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        return key[1] in self._by_topic.get(key[0], _NO_STATES)

    def __iter__(self) -> Iterator[tuple[str, int]]:
        for topic, states in self._by_topic.items():
            for partition in states:
                yield topic, partition

    def __len__(self) -> int:
        return self._len


_NO_STATES: Mapping[int, PartitionState] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """The cluster metadata as of etcd ``revision``."""

    revision: int
    controller: ControllerRecord | None = None
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    topics: Mapping[str, TopicRecord] = field(default_factory=dict)
    partitions: Mapping[tuple[str, int], PartitionState] = field(default_factory=dict)
    #: Brokers being drained (by id; a drained broker need not be alive).
    decommissions: Mapping[int, BrokerDecommission] = field(default_factory=dict)
    #: Every broker the cluster has known, registered now or not (by id).
    broker_records: Mapping[int, BrokerRecord] = field(default_factory=dict)
    #: Share groups by name (``share-groups/<g>``).
    share_groups: Mapping[str, ShareGroupRecord] = field(default_factory=dict)
    #: ``partitions`` by topic, in partition order: built on first use (``partitions_of``).
    _by_topic: dict[str, list[PartitionState]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def draining(self) -> frozenset[int]:
        """The ids of the brokers being decommissioned."""
        return frozenset(self.decommissions)

    def partitions_of(self, topic: str) -> list[PartitionState]:
        """The known partitions of ``topic`` in partition order (read from a ``PartitionMap``
        directly; otherwise an index over every topic is built on the first call, so asking
        for each topic costs one pass, not one per topic)."""
        if isinstance(self.partitions, PartitionMap):
            of_topic = self.partitions.of(topic)
            return [of_topic[p] for p in sorted(of_topic)]
        index = self._by_topic
        if index is None:
            index = {}
            for (name, _), state in self.partitions.items():
                index.setdefault(name, []).append(state)
            for states in index.values():
                states.sort(key=lambda state: state.partition)
            object.__setattr__(self, "_by_topic", index)  # frozen: a cache, not a field
        return list(index.get(topic, ()))

    def leader_of(self, topic: str, partition: int) -> BrokerRegistration | None:
        """The live broker leading the partition, if any."""
        state = self.partitions.get((topic, partition))
        if state is None or not state.has_leader:
            return None
        return self.brokers.get(state.leader)
