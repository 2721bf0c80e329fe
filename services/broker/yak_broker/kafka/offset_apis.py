"""A group's committed offsets on the wire: OffsetCommit (api key 8, v2-v8) and OffsetFetch
(9, v1-v8; v8 batches groups), at the group's coordinator (``kafka/groups/coordinator.py``).

Offsets live where every group's do, ``offsets/<g>/<topic>/<p>`` (``CommittedOffset``), so
what a Kafka client commits is what the REST API shows for the group, and the reverse.

- OffsetCommit: the request's identity (member id, generation, instance id) is checked by the
  group's machine, then every partition is written in one transaction (split above etcd's
  limit) under the group's marker; one group error answers every partition. A partition of a
  topic that does not exist gets UNKNOWN_TOPIC_OR_PARTITION, metadata above 4 KiB
  OFFSET_METADATA_TOO_LARGE (Kafka's ``offset.metadata.max.bytes``); the rest are written.
  v2-v4's retention time is ignored (offsets are kept until the group is deleted).
- OffsetFetch: the partitions asked for (all the group has, when the topics are null: v2+),
  -1 for a partition without a commit. v1 has no group error field: its error goes on every
  partition.

ACLs (``kafka.authorize``), as Kafka's: OffsetCommit needs READ on the group (else every
partition GROUP_AUTHORIZATION_FAILED) and READ on each topic (else its partitions
TOPIC_AUTHORIZATION_FAILED, and they are not written); OffsetFetch DESCRIBE on the group (else
the group's error) and on each topic (partitions of a topic asked for and not describable get
TOPIC_AUTHORIZATION_FAILED; a fetch of all topics leaves them out).
"""

from __future__ import annotations

from typing import Any

from yak.metadata.models import CommittedOffset
from yak.protocol.broker_wire import Buffer
from yak.protocol.kafka_errors import GroupErrorCode
from yak.security.acl import Operation, ResourceType
from yak.types import TopicPartition
from yak_broker.kafka.authorize import authorize, authorized, visible
from yak_broker.kafka.context import KafkaRequest
from yak_broker.kafka.groups.coordinator import OffsetToCommit
from yak_broker.kafka.groups.state.records import Heartbeat
from yak_broker.kafka.schemas import read_request, write_response

__all__ = ["handle_offset_commit", "handle_offset_fetch"]

API_OFFSET_COMMIT, API_OFFSET_FETCH = 8, 9
#: Kafka's ``offset.metadata.max.bytes``.
MAX_METADATA_BYTES = 4096
_E = GroupErrorCode
_TOPIC_DENIED = 29  # TOPIC_AUTHORIZATION_FAILED


async def handle_offset_commit(request: KafkaRequest) -> list[Buffer]:
    version = request.api_version
    parsed = read_request(API_OFFSET_COMMIT, version, request.body)
    snapshot = request.server.broker.snapshot()
    group = str(parsed.group_id)
    may_group = authorize(request, Operation.READ, ResourceType.GROUP, group)
    readable = authorized(
        request, Operation.READ, ResourceType.TOPIC, [str(t.name) for t in parsed.topics]
    )
    errors: dict[TopicPartition, int] = {}  # Kafka error codes
    wanted: dict[TopicPartition, OffsetToCommit] = {}
    for topic in parsed.topics:
        for p in topic.partitions:
            tp = TopicPartition(str(topic.name), int(p.partition_index))
            metadata = p.committed_metadata or ""
            if not may_group:
                errors[tp] = _E.GROUP_AUTHORIZATION_FAILED
            elif tp.topic not in readable:
                errors[tp] = _TOPIC_DENIED
            elif (tp.topic, tp.partition) not in snapshot.partitions:
                errors[tp] = _E.UNKNOWN_TOPIC_OR_PARTITION
            elif len(metadata.encode()) > MAX_METADATA_BYTES:
                errors[tp] = _E.OFFSET_METADATA_TOO_LARGE
            else:
                epoch = int(getattr(p, "committed_leader_epoch", -1))
                wanted[tp] = OffsetToCommit(int(p.committed_offset), epoch, metadata)
    identity = Heartbeat(
        parsed.member_id,
        int(parsed.generation_id_or_member_epoch),
        getattr(parsed, "group_instance_id", None),
    )
    if wanted:
        error = await request.server.groups.commit(group, identity, wanted)
        errors.update(dict.fromkeys(wanted, error))
    values = {
        "throttle_time": 0,
        "topics": [
            {
                "name": topic.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": errors[
                            TopicPartition(str(topic.name), int(p.partition_index))
                        ],
                    }
                    for p in topic.partitions
                ],
            }
            for topic in parsed.topics
        ],
    }
    return write_response(API_OFFSET_COMMIT, version, request.correlation_id, values)


async def handle_offset_fetch(request: KafkaRequest) -> list[Buffer]:
    version = request.api_version
    parsed = read_request(API_OFFSET_FETCH, version, request.body)
    if version >= 8:
        groups = [
            await _group_offsets(request, str(g.group_id), _asked(g.topics, "partition_indexes"))
            for g in parsed.groups
        ]
        values: dict[str, Any] = {"throttle_time": 0, "groups": groups}
    else:
        one = await _group_offsets(
            request, str(parsed.group_id), _asked(parsed.topics, "partition_indexes")
        )
        if version < 2 and one["error_code"] is not _E.NONE:
            for topic in one["topics"]:
                for partition in topic["partitions"]:
                    partition["error_code"] = one["error_code"]
        values = {"throttle_time": 0, "topics": one["topics"], "error_code": one["error_code"]}
    return write_response(API_OFFSET_FETCH, version, request.correlation_id, values)


def _asked(topics: Any, field: str) -> dict[str, list[int]] | None:
    """The partitions asked for by topic (None: all the group has)."""
    if topics is None:
        return None
    return {str(t.name): [int(p) for p in getattr(t, field)] for t in topics}


async def _group_offsets(
    request: KafkaRequest, group: str, asked: dict[str, list[int]] | None
) -> dict[str, Any]:
    committed: dict[TopicPartition, CommittedOffset] = {}
    if not authorize(request, Operation.DESCRIBE, ResourceType.GROUP, group):
        error = _E.GROUP_AUTHORIZATION_FAILED
    else:
        error, committed = await request.server.groups.committed(group)
    if asked is None:
        asked = {}
        for topic, partition in sorted(committed):
            asked.setdefault(topic, []).append(partition)
        describable = set(visible(request, Operation.DESCRIBE, ResourceType.TOPIC, asked))
        asked = {t: ps for t, ps in asked.items() if t in describable}
        denied: set[str] = set()
    else:
        denied = set(asked) - authorized(request, Operation.DESCRIBE, ResourceType.TOPIC, asked)
    return {
        "group_id": group,
        "error_code": error,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    _denied(p)
                    if topic in denied
                    else _partition(p, committed.get(TopicPartition(topic, p)))
                    for p in partitions
                ],
            }
            for topic, partitions in asked.items()
        ],
    }


def _denied(partition: int) -> dict[str, Any]:
    return {**_partition(partition, None), "error_code": _TOPIC_DENIED}


def _partition(partition: int, mark: CommittedOffset | None) -> dict[str, Any]:
    if mark is None:
        return {
            "partition_index": partition,
            "committed_offset": -1,
            "committed_leader_epoch": -1,
            "metadata": "",
            "error_code": _E.NONE,
        }
    return {
        "partition_index": partition,
        "committed_offset": mark.offset,
        "committed_leader_epoch": mark.leader_epoch,
        "metadata": mark.metadata,
        "error_code": _E.NONE,
    }
