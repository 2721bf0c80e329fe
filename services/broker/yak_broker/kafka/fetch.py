"""Fetch (api key 1, v4-v12) for consumers, through ``server.fetcher.serve_fetch``.

The same read as every other door: whole batches below the high watermark, the request's and
each partition's ``max_bytes`` (the first partition with data returns at least one batch), a
long poll of up to ``max_wait_ms`` (capped at the broker's ``max_wait_ms_limit``) until
``min_bytes`` are there, ``current_leader_epoch`` fencing, per-partition errors
(``NOT_LEADER_OR_FOLLOWER``, ``OFFSET_OUT_OF_RANGE`` with the log start offset and high
watermark...). ``isolation_level``: Yak has no transactions, so the last stable offset is the
high watermark and read_committed reads what read_uncommitted does. A partition of a topic
the principal may not READ (``kafka.authorize``, as the REST record reads) is answered with
``TOPIC_AUTHORIZATION_FAILED`` and no records; the others are served. The records returned
count against the principal's fetch quota (``kafka.quotas``: a throttled answer carries
``throttle_time_ms`` and is held that long).

**Fetch sessions** (KIP-227, v7+): none are created here — every answer says session id 0,
which tells a client to keep sending full fetches (Kafka's ``FetchSessionHandler`` does); an
incremental fetch (session epoch > 0) of a session this listener never gave gets
``FETCH_SESSION_ID_NOT_FOUND``, and the client starts over with a full one. Only consumers
fetch here: a request with a replica id (a follower's) is refused — replication travels on the
internal listener, where followers authenticate.

v12 bodies are parsed and answered by the internal plane's hand-written codec (``kafka_wire``:
record bytes are written without a copy; errors carry its tagged field, which Kafka clients
skip); v4-v11 by kio. Single event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from yak.errors import InvalidRequestError, TopicAuthorizationError
from yak.protocol import kafka_wire as kw
from yak.protocol.broker_wire import (
    CONSUMER_REPLICA_ID,
    Buffer,
    FetchedPartition,
    FetchPartition,
    FetchRequest,
    PartitionError,
    check_unique,
)
from yak.protocol.kafka_errors import kafka_error_code
from yak.security.acl import Operation, ResourceType
from yak_broker.kafka.authorize import authorized
from yak_broker.kafka.context import KafkaRequest
from yak_broker.kafka.quotas import QuotaKind
from yak_broker.kafka.schemas import read_request, write_response
from yak_broker.server.fetcher import serve_fetch

__all__ = ["handle_fetch"]

API_FETCH = 1
_FETCH_SESSION_ID_NOT_FOUND = 70
_FETCH = QuotaKind.FETCH


def _decode(version: int, body: memoryview) -> FetchRequest:
    if version == kw.FETCH_VERSION:
        return kw.decode_fetch_request(body)
    parsed = read_request(API_FETCH, version, body)
    partitions = tuple(
        FetchPartition(
            str(topic.topic),
            int(p.partition),
            int(p.fetch_offset),
            int(p.partition_max_bytes),
            int(getattr(p, "current_leader_epoch", -1)),
        )
        for topic in parsed.topics
        for p in topic.partitions
    )
    for p in partitions:
        if p.partition < 0 or p.offset < 0 or p.max_bytes < 1:
            raise InvalidRequestError(f"a malformed fetch of {p.topic}-{p.partition}")
    check_unique(list(partitions))
    return FetchRequest(
        partitions,
        max_wait_ms=max(0, int(parsed.max_wait.total_seconds() * 1000)),
        min_bytes=max(0, int(parsed.min_bytes)),
        max_bytes=max(1, int(getattr(parsed, "max_bytes", 50 * 1024 * 1024))),
        replica_id=int(parsed.replica_id),
        session_id=int(getattr(parsed, "session_id", 0)),
        session_epoch=int(getattr(parsed, "session_epoch", -1)),
    )


async def handle_fetch(request: KafkaRequest) -> list[Buffer]:
    version, correlation_id = request.api_version, request.correlation_id
    fetch = _decode(version, request.body)
    if fetch.replica_id != CONSUMER_REPLICA_ID:
        raise InvalidRequestError("followers fetch on the internal listener")
    if fetch.session_epoch > 0:
        return _answer(version, correlation_id, (), _FETCH_SESSION_ID_NOT_FOUND)
    readable = authorized(
        request, Operation.READ, ResourceType.TOPIC, (p.topic for p in fetch.partitions)
    )
    denied = [_denied(p) for p in fetch.partitions if p.topic not in readable]
    allowed = tuple(p for p in fetch.partitions if p.topic in readable)
    partitions: Sequence[FetchedPartition] = ()
    if allowed:
        broker = request.server.broker
        partitions = await serve_fetch(
            fetch._replace(partitions=allowed, session_id=0, session_epoch=-1),
            broker.replicas,
            max_wait_limit_ms=broker.settings.max_wait_ms_limit,
        )
    size = sum(len(memoryview(p.records)) for p in partitions)
    quotas = request.server.quotas
    throttle_ms = 0 if quotas is None else await quotas.throttle(_FETCH, request.principal, size)
    return _answer(version, correlation_id, [*partitions, *denied], 0, throttle_ms)


def _denied(partition: FetchPartition) -> FetchedPartition:
    error = TopicAuthorizationError(
        f"not authorized to read topic {partition.topic!r}",
        resource_type=ResourceType.TOPIC.value,
        resource_name=partition.topic,
        operation=Operation.READ.value,
    )
    return FetchedPartition(partition.topic, partition.partition, error=PartitionError.of(error))


def _answer(
    version: int,
    correlation_id: int,
    partitions: Sequence[FetchedPartition],
    error_code: int,
    throttle_ms: int = 0,
) -> list[Buffer]:
    if version == kw.FETCH_VERSION:
        return kw.encode_fetch_response(
            correlation_id, partitions, error_code=error_code, throttle_time_ms=throttle_ms
        )
    grouped: dict[str, list[dict[str, Any]]] = {}
    for p in partitions:
        grouped.setdefault(p.topic, []).append(
            {
                "partition_index": p.partition,
                "error_code": kafka_error_code(p.error),
                "high_watermark": p.high_watermark,
                "last_stable_offset": p.last_stable_offset,
                "log_start_offset": p.log_start_offset,
                "aborted_transactions": [],
                "preferred_read_replica": -1,
                "records": bytes(p.records),
            }
        )
    values = {
        "throttle_time": throttle_ms,
        "error_code": error_code,
        "session_id": 0,
        "responses": [{"topic": t, "partitions": parts} for t, parts in grouped.items()],
    }
    return write_response(API_FETCH, version, correlation_id, values)
