"""DeleteRecords (api key 21, v0-v2): move partitions' log start offsets up, at their leader.

As in Kafka, DeleteRecords is not a controller request: a client sends each partition to its
leader, and a broker that does not lead a partition answers ``NOT_LEADER_OR_FOLLOWER`` for it
(``UNKNOWN_TOPIC_OR_PARTITION`` for one that does not exist), so the client refreshes its
metadata and retries there. Per partition: offset ``-1`` is the high watermark (delete
everything readable); an offset above the high watermark or below -1 is
``OFFSET_OUT_OF_RANGE``; below the current log start it changes nothing. The answer's low
watermark is the log start offset afterwards (``Log.delete_records``; followers follow it
through replication). It needs DELETE on the topic (``TOPIC_AUTHORIZATION_FAILED``, audited,
as each deletion made is). Single event loop; each partition is answered synchronously.
"""

from __future__ import annotations

from typing import Any

from yak.errors import OffsetOutOfRangeError, YakError
from yak.protocol.broker_wire import Buffer
from yak.security.acl import Operation, ResourceType
from yak.types import TopicPartition
from yak_broker.kafka.context import KafkaRequest
from yak_broker.kafka.controller import made, require
from yak_broker.kafka.schemas import read_request, write_response
from yak_broker.replication.replica_manager import ReplicaManager

__all__ = ["handle_delete_records"]

API_DELETE_RECORDS = 21
HIGH_WATERMARK = -1


def _delete(
    request: KafkaRequest, replicas: ReplicaManager, tp: TopicPartition, offset: int
) -> dict[str, Any]:
    answer: dict[str, Any] = {"partition_index": tp.partition}
    try:
        require(request, Operation.DELETE, ResourceType.TOPIC, tp.topic)
        replica, _ = replicas.leader(tp)
        log = replica.log
        if offset < HIGH_WATERMARK:
            raise OffsetOutOfRangeError(f"cannot delete records up to {offset}", offset=offset)
        target = log.high_watermark if offset == HIGH_WATERMARK else offset
        answer.update(low_watermark=log.delete_records(target), error_code=0)
        made(request, Operation.DELETE, ResourceType.TOPIC, f"{tp.topic}-{tp.partition}")
    except YakError as exc:
        answer.update(low_watermark=-1, error_code=exc.kafka_code)
    return answer


async def handle_delete_records(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_DELETE_RECORDS, request.api_version, request.body)
    replicas = request.server.broker.replicas
    topics = []
    for topic in parsed.topics:
        name = str(topic.name)
        partitions = [
            _delete(request, replicas, TopicPartition(name, int(p.partition_index)), p.offset)
            for p in topic.partitions
        ]
        topics.append({"name": name, "partitions": partitions})
    values = {"throttle_time": 0, "topics": topics}
    return write_response(API_DELETE_RECORDS, request.api_version, request.correlation_id, values)
