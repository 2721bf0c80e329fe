"""What share-group requests look up before any broker is asked, and the broker client they use.

``ShareLookup.known_group``: the share group exists (``ClusterSnapshot.share_groups``, looked up
again once the metadata cache caught up with etcd, so a group made through the coordinator a
moment ago is found) — else ``GROUP_ID_NOT_FOUND``. ``topic_ids``: topic names to the topic ids
Kafka's share messages carry (``TopicRecord.topic_id``). ``by_leader``: partitions grouped by
their live leader. ``LEADER_MOVED``: the errors after which a partition is tried once more at the
leader the metadata names next. Single event loop.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Protocol

from yak.errors import (
    GroupIdNotFoundError,
    InvalidRequestError,
    LeaderNotAvailableError,
    NetworkError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
    YakError,
)
from yak.metadata.cache import ClusterSnapshot, MetadataCache
from yak.metadata.keyspace import validate_member_id
from yak.names import validate_group_id
from yak.protocol.kafka_share import (
    AckResult,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareFetchResponse,
)
from yak.types import topic_uuid
from yak_rest_proxy.brokers import leader_of
from yak_rest_proxy.topics import TopicLookup

__all__ = [
    "LEADER_MOVED",
    "ShareClient",
    "ShareLookup",
    "by_leader",
    "check_member",
    "leader_moved",
    "topic_ids",
    "topic_uuid",
]

#: Errors after which a partition is tried once more, at the leader the metadata names next.
LEADER_MOVED = (NotLeaderOrFollowerError, LeaderNotAvailableError, NetworkError)


class ShareClient(Protocol):
    """What share requests need of a broker's client (``BrokerClient`` is one)."""

    async def share_fetch(self, request: ShareFetchRequest) -> ShareFetchResponse: ...

    async def share_acknowledge(
        self, request: ShareAcknowledgeRequest
    ) -> tuple[AckResult, ...]: ...


class ShareLookup:
    """The metadata cache as share requests read it (see the module docstring)."""

    def __init__(self, cache: MetadataCache, topics: TopicLookup) -> None:
        self._cache = cache
        self._topics = topics

    @property
    def snapshot(self) -> ClusterSnapshot:
        return self._cache.snapshot

    async def sync_partitions(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Wait (bounded) until the cache holds etcd's states of ``partitions`` (a leader
        moved)."""
        await self._topics.sync_partitions(partitions)

    async def snapshot_of(self, topics: set[str]) -> ClusterSnapshot:
        """The snapshot, after one catch-up if it lacks any of ``topics`` or their partitions."""
        return await self._topics.snapshot_of(topics)

    async def known_group(self, group: str) -> None:
        """``GROUP_ID_NOT_FOUND`` unless the share group exists (after one catch-up)."""
        validate_group_id(group)
        if not _has_group(self._cache.snapshot, group):
            await self._topics.sync(self._topics.keyspace.share_group(group))
            if not _has_group(self._cache.snapshot, group):
                raise GroupIdNotFoundError(f"share group {group!r} does not exist", group=group)


def leader_moved(error: YakError | None) -> bool:
    return isinstance(error, LEADER_MOVED)


def check_member(member: str) -> None:
    """``INVALID_REQUEST`` unless ``member`` is a legal member id."""
    try:
        validate_member_id(member)
    except ValueError:
        raise InvalidRequestError(
            f"member_id {member!r} is not valid: use 1-249 of [a-zA-Z0-9._-]"
        ) from None


def _has_group(snapshot: ClusterSnapshot, group: str) -> bool:
    record = snapshot.share_groups.get(group)
    return record is not None and not record.deleting


def topic_ids(snapshot: ClusterSnapshot, topics: Sequence[str]) -> dict[str, uuid.UUID]:
    """Each named topic's id, in the order named; ``UNKNOWN_TOPIC_OR_PARTITION`` for one the
    metadata does not know."""
    ids: dict[str, uuid.UUID] = {}
    for name in dict.fromkeys(topics):
        record = snapshot.topics.get(name)
        topic_id = None if record is None or record.deleting else topic_uuid(record.topic_id)
        if topic_id is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist", topic=name)
        ids[name] = topic_id
    return ids


def by_leader(
    snapshot: ClusterSnapshot, wanted: Iterable[tuple[str, int]]
) -> tuple[dict[int, list[tuple[str, int]]], list[tuple[str, int, YakError]]]:
    """``wanted`` partitions by their leader's id, and those without a live leader."""
    grouped: dict[int, list[tuple[str, int]]] = {}
    failed: list[tuple[str, int, YakError]] = []
    for topic, partition in wanted:
        try:
            broker = leader_of(snapshot, topic, partition)
        except YakError as exc:
            failed.append((topic, partition, exc))
            continue
        grouped.setdefault(broker.broker_id, []).append((topic, partition))
    return grouped, failed
