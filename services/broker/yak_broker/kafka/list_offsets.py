"""ListOffsets (api key 2, v1-v7) and OffsetForLeaderEpoch (api key 23, v2-v4), at the leader.

ListOffsets, per partition: ``-1`` (latest) is the high watermark (also for read_committed:
Yak has no transactions, so the last stable offset is the high watermark), ``-2`` (earliest)
the log start offset, ``-3`` (max timestamp, v7) the first record carrying the log's largest
timestamp, and a timestamp ``t >= 0`` the first record whose timestamp is ``>= t`` below the
high watermark, or offset -1 when there is none. The log answers at batch granularity (its
time index does not decode records); the batch it names is then read and decoded here to find
the record, as Kafka answers. The answer carries that record's timestamp (-1 for latest and
earliest) and the partition's current leader epoch. ``current_leader_epoch`` (v4+) is fenced
as a fetch's is. A replica id other than the consumer's -1 is not special here.

OffsetForLeaderEpoch answers where an epoch ends in the leader's log
(``LeaderPartition.answer_epoch_query``, KIP-279): consumers ask it after a leader change to
detect truncation. Both need DESCRIBE on the topic (Kafka's ACLs for them, and the REST
offsets routes'; READ implies it): a partition of a topic the principal may not describe
gets ``TOPIC_AUTHORIZATION_FAILED`` (``kafka.authorize``). Errors per partition, as every
Yak error's Kafka number. Single event loop; each partition is answered synchronously.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from yak.errors import YakError
from yak.protocol.broker_wire import Buffer
from yak.record.batch import iter_records
from yak.security.acl import Operation, ResourceType
from yak.types import TopicPartition
from yak_broker.kafka.authorize import TOPIC_AUTHORIZATION_FAILED, authorized
from yak_broker.kafka.context import KafkaRequest
from yak_broker.kafka.schemas import read_request, write_response
from yak_broker.replication.replica_manager import ReplicaManager
from yak_broker.storage.log import Log

__all__ = ["handle_list_offsets", "handle_offset_for_leader_epoch", "offset_for_time"]

API_LIST_OFFSETS = 2
API_OFFSET_FOR_LEADER_EPOCH = 23
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
_READ_BYTES = 64 * 1024  # at least one whole batch is read, whatever this says


async def handle_list_offsets(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_LIST_OFFSETS, request.api_version, request.body)
    replicas = request.server.broker.replicas
    described = _describable(request, (str(topic.name) for topic in parsed.topics))
    topics = [
        {
            "name": topic.name,
            "partitions": [
                _list_offset(
                    replicas,
                    TopicPartition(str(topic.name), int(p.partition_index)),
                    int(p.timestamp),
                    int(getattr(p, "current_leader_epoch", -1)),
                )
                if topic.name in described
                else _denied("partition_index", int(p.partition_index), timestamp=-1, offset=-1)
                for p in topic.partitions
            ],
        }
        for topic in parsed.topics
    ]
    values = {"throttle_time": 0, "topics": topics}
    return write_response(API_LIST_OFFSETS, request.api_version, request.correlation_id, values)


def _describable(request: KafkaRequest, topics: Iterable[str]) -> set[str]:
    return authorized(request, Operation.DESCRIBE, ResourceType.TOPIC, topics)


def _denied(key: str, partition: int, **answer: int) -> dict[str, Any]:
    return {key: partition, "error_code": TOPIC_AUTHORIZATION_FAILED, **answer}


def _list_offset(
    replicas: ReplicaManager, tp: TopicPartition, timestamp: int, current_epoch: int
) -> dict[str, Any]:
    answer: dict[str, Any] = {"partition_index": tp.partition, "error_code": 0}
    try:
        replica, leader = replicas.leader_partition(tp)
        leader.check_epoch(current_epoch)
        found = offset_for_time(replica.log, timestamp)
    except YakError as exc:
        answer.update(error_code=exc.kafka_code, timestamp=-1, offset=-1)
        return answer
    answer.update(timestamp=found[0], offset=found[1], leader_epoch=leader.leader_epoch)
    return answer


def offset_for_time(log: Log, timestamp: int) -> tuple[int, int]:
    """``(timestamp, offset)`` ListOffsets answers for ``timestamp`` (see the module doc)."""
    if timestamp in (LATEST, EARLIEST):
        offset = log.offset_for_timestamp(timestamp)
        return -1, -1 if offset is None else offset
    if timestamp == MAX_TIMESTAMP:
        segments = [s for s in log.segments if s.max_timestamp >= 0]
        if not segments:
            return -1, -1
        timestamp = max(s.max_timestamp for s in segments)
    if timestamp < 0:
        return -1, -1
    batch_offset = log.offset_for_timestamp(timestamp)
    if batch_offset is None:
        return -1, -1
    upper = log.high_watermark
    offset = batch_offset
    while offset < upper:
        read_from = offset
        for record in iter_records(log.read(offset, _READ_BYTES).records, from_offset=offset):
            if record.offset >= upper:
                return -1, -1
            if record.timestamp >= timestamp:
                return record.timestamp, record.offset
            offset = record.offset + 1
        if offset == read_from:  # nothing more below the high watermark
            break
    return -1, -1


async def handle_offset_for_leader_epoch(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_OFFSET_FOR_LEADER_EPOCH, request.api_version, request.body)
    replicas = request.server.broker.replicas
    described = _describable(request, (str(topic.topic) for topic in parsed.topics))
    topics = []
    for topic in parsed.topics:
        answers = []
        for p in topic.partitions:
            if topic.topic not in described:
                answers.append(
                    _denied("partition", int(p.partition), leader_epoch=-1, end_offset=-1)
                )
                continue
            tp = TopicPartition(str(topic.topic), int(p.partition))
            answer: dict[str, Any] = {"partition": tp.partition, "error_code": 0}
            try:
                _, leader = replicas.leader_partition(tp)
                epoch, end = leader.answer_epoch_query(
                    int(p.current_leader_epoch), int(p.leader_epoch)
                )
                answer.update(leader_epoch=epoch, end_offset=end)
            except YakError as exc:
                answer.update(error_code=exc.kafka_code, leader_epoch=-1, end_offset=-1)
            answers.append(answer)
        topics.append({"topic": topic.topic, "partitions": answers})
    values = {"throttle_time": 0, "topics": topics}
    return write_response(
        API_OFFSET_FOR_LEADER_EPOCH, request.api_version, request.correlation_id, values
    )
