"""Produce (api key 0, v0-v9) and InitProducerId (api key 22, v0-v4, idempotent producers only).

**Produce** goes through ``server.appender.append_partitions``, the path every door shares:
the log validates each partition's batches (framing, CRC-32C, ``max.message.bytes``, the
idempotent producer's sequence) before writing any byte, and the batches are stored as they
arrived — compressed ones too (gzip, snappy, lz4, zstd: the storage never decompresses to
append). acks 0/1/all as there; acks=0 gets no answer. v0-v2 (message formats v0/v1) are
refused per partition (``produce_legacy``). v9 bodies are parsed by the internal
plane's hand-written decoder (``kafka_wire``: record bytes are not copied), older versions by
kio; a v9 answer without a refused partition is written by its hand-written encoder (without
Yak's tagged fields), the others by kio. A partition whose records hold a batch of magic < 2
(Kafka's message formats v0/v1, which Yak does not store) gets
``UNSUPPORTED_FOR_MESSAGE_FORMAT`` and is not appended; its neighbours still are. A
partition of a topic the principal may not WRITE (``kafka.authorize``, as the REST produce
routes) gets ``TOPIC_AUTHORIZATION_FAILED`` and is not appended either
(with acks=0, which has no answer to carry it, the connection is closed, as Kafka does).
The appended bytes count against the principal's produce quota (``kafka.quotas``: a
throttled answer carries ``throttle_time_ms`` and is held that long). Errors keep Kafka's
numbers (``YakError.kafka_code``) and messages; the
response carries no Yak-specific tagged fields.

**InitProducerId** hands out a fresh producer id at epoch 0 (``yak.metadata.producer_ids``:
blocks from the metadata store, shared with the rest-proxy's producer sessions), also when the
request names its current id and epoch (KIP-360's epoch bump): a new id serves that purpose
as well, and the storage's producer state starts it cleanly. A ``transactional_id`` is refused with
``INVALID_REQUEST`` (Yak has no transactions); a failure to reserve ids answers the retriable
``COORDINATOR_NOT_AVAILABLE``. It needs an authenticated principal only, as the REST producer
sessions: a producer id alone writes nothing, each batch it stamps is checked as a WRITE.
Single event loop.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from typing import Any

from yak.errors import InvalidRequestError, YakError
from yak.protocol import kafka_wire as kw
from yak.protocol.broker_wire import (
    ACKS_ALL,
    Buffer,
    ProducePartition,
    ProduceRequest,
    ProduceResult,
    check_unique,
)
from yak.protocol.kafka_errors import kafka_error_code
from yak.security.acl import Operation, ResourceType
from yak_broker.kafka.authorize import TOPIC_AUTHORIZATION_FAILED, authorized
from yak_broker.kafka.context import KafkaRequest
from yak_broker.kafka.produce_legacy import LEGACY_VERSIONS, refuse_legacy_produce
from yak_broker.kafka.quotas import QuotaKind
from yak_broker.kafka.schemas import read_request, write_response
from yak_broker.server.appender import append_partitions

__all__ = ["handle_init_producer_id", "handle_produce", "has_legacy_batch"]

_log = logging.getLogger(__name__)
API_PRODUCE = 0
API_INIT_PRODUCER_ID = 22
_UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
_COORDINATOR_NOT_AVAILABLE = 15
_INVALID_REQUEST = 42
_BATCH_LENGTH = struct.Struct(">i")
_PRODUCE = QuotaKind.PRODUCE
_MAGIC_AT = 16  # base offset int64, length int32, partition leader epoch int32, then magic


def has_legacy_batch(records: Buffer) -> bool:
    """Whether ``records`` hold a batch of magic 0 or 1 (walking the batches' lengths only;
    a malformed tail is left to the log's validation)."""
    view = memoryview(records)
    position = 0
    while position + _MAGIC_AT < len(view):
        if view[position + _MAGIC_AT] < 2:
            return True
        (length,) = _BATCH_LENGTH.unpack_from(view, position + 8)
        if length <= 0:
            return False
        position += 12 + length
    return False


def _decode(version: int, body: memoryview) -> ProduceRequest:
    if version == kw.PRODUCE_VERSION:
        return kw.decode_produce_request(body)
    parsed = read_request(API_PRODUCE, version, body)
    acks = int(parsed.acks)
    if acks not in (0, 1, ACKS_ALL):
        raise InvalidRequestError(f"acks must be 0, 1 or -1 (all), got {acks}")
    timeout_ms = int(parsed.timeout.total_seconds() * 1000)
    partitions = tuple(
        ProducePartition(str(topic.name), int(p.index), p.records or b"")
        for topic in parsed.topic_data
        for p in topic.partition_data
    )
    if not partitions or timeout_ms < 0:
        raise InvalidRequestError("a produce request needs partitions and a timeout >= 0")
    check_unique(list(partitions))
    return ProduceRequest(partitions, acks, timeout_ms)


async def handle_produce(request: KafkaRequest) -> list[Buffer] | None:
    replicas = request.server.broker.replicas
    replicas.stats.produce_requests.inc()
    if request.api_version in LEGACY_VERSIONS:
        return refuse_legacy_produce(request.api_version, request.correlation_id, request.body)
    produce = _decode(request.api_version, request.body)
    writable = authorized(
        request, Operation.WRITE, ResourceType.TOPIC, (p.topic for p in produce.partitions)
    )
    refused = {
        (p.topic, p.partition): _DENIED if p.topic not in writable else _LEGACY
        for p in produce.partitions
        if p.topic not in writable or has_legacy_batch(p.records)
    }
    accepted = tuple(p for p in produce.partitions if (p.topic, p.partition) not in refused)
    results: list[ProduceResult] = []
    if accepted:
        results = await append_partitions(produce._replace(partitions=accepted), replicas)
    size = sum(len(memoryview(p.records)) for p in accepted)
    quotas = request.server.quotas
    throttle_ms = 0 if quotas is None else await quotas.throttle(_PRODUCE, request.principal, size)
    if produce.acks == 0:
        if _DENIED in refused.values():  # no answer to carry the error: Kafka closes
            raise InvalidRequestError(f"acks=0 produce by {request.principal} was denied")
        return None
    if request.api_version == kw.PRODUCE_VERSION and not refused:  # the hand-written encoder
        return kw.encode_produce_response(
            request.correlation_id, results, throttle_ms=throttle_ms, yak_tags=False
        )
    appended = {(r.topic, r.partition): r for r in results}
    entries = []
    for p in produce.partitions:
        key = p.topic, p.partition
        entries.append(_refused(p, *refused[key]) if key in refused else _answer(appended[key]))
    values = {"responses": _by_topic(entries), "throttle_time": throttle_ms}
    return write_response(API_PRODUCE, request.api_version, request.correlation_id, values)


def _answer(result: ProduceResult) -> tuple[str, dict[str, Any]]:
    error = result.error
    return result.topic, {
        "index": result.partition,
        "error_code": kafka_error_code(error),
        "base_offset": result.base_offset,
        "log_append_time": result.log_append_time,
        "log_start_offset": result.log_start_offset,
        "record_errors": [],
        "error_message": error.message if error is not None else None,
    }


_LEGACY = (_UNSUPPORTED_FOR_MESSAGE_FORMAT, "Yak stores record batches of magic 2 only")
_DENIED = (TOPIC_AUTHORIZATION_FAILED, "Not authorized to write to the topic")


def _refused(
    partition: ProducePartition, error_code: int, message: str
) -> tuple[str, dict[str, Any]]:
    return partition.topic, {
        "index": partition.partition,
        "error_code": error_code,
        "base_offset": -1,
        "log_append_time": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": message,
    }


def _by_topic(entries: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for topic, entry in entries:
        grouped.setdefault(topic, []).append(entry)
    return [{"name": name, "partition_responses": parts} for name, parts in grouped.items()]


async def handle_init_producer_id(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_INIT_PRODUCER_ID, request.api_version, request.body)
    values: dict[str, Any] = {"throttle_time": 0, "producer_id": -1, "producer_epoch": -1}
    if parsed.transactional_id is not None:
        values["error_code"] = _INVALID_REQUEST
    else:
        try:
            values["producer_id"] = await request.server.producer_ids.allocate()
            values["producer_epoch"] = 0
            values["error_code"] = 0
        except (YakError, OSError) as exc:
            _log.warning("InitProducerId: no producer id could be reserved: %s", exc)
            values["error_code"] = _COORDINATOR_NOT_AVAILABLE
    return write_response(API_INIT_PRODUCER_ID, request.api_version, request.correlation_id, values)
