"""Share groups on Kafka's wire: ShareFetch v1 and ShareAcknowledge v1 (KIP-932), pure.

The rest-proxy acquires and acknowledges records of a share group at each partition's leader
with Kafka's own share messages, on the internal plane's persistent connections (Kafka framing:
``kafka_wire``), so that the public Kafka listener can serve Kafka's share consumers with the
same codec:

=======================  ====  =======  =====================================================
message                  key   version  header (request / response)
=======================  ====  =======  =====================================================
ShareFetch               78    1        v2 / v1 (flexible)
ShareAcknowledge         79    1        v2 / v1 (flexible)
=======================  ====  =======  =====================================================

ShareFetch request: ``group_id, member_id, share_session_epoch, max_wait_ms, min_bytes,
max_bytes, max_records, batch_size, topics [topic_id uuid, partitions [partition_index,
acknowledgement_batches [first_offset, last_offset, acknowledge_types [int8]]]],
forgotten_topics_data [topic_id, partitions [int32]]``. Response: ``throttle_time_ms,
error_code, error_message, acquisition_lock_timeout_ms, responses [topic_id, partitions
[partition_index, error_code, error_message, acknowledge_error_code,
acknowledge_error_message, current_leader {leader_id, leader_epoch}, records,
acquired_records [first_offset, last_offset, delivery_count int16]]], node_endpoints [node_id,
host, port, rack]``. ShareAcknowledge: ``group_id, member_id, share_session_epoch, topics
[topic_id, partitions [partition_index, acknowledgement_batches]]``; its response ``throttle,
error_code, error_message, responses [topic_id, partitions [partition_index, error_code,
error_message, current_leader]], node_endpoints``. Every struct ends in tagged fields.

Acknowledge types (Kafka's numbers): 0 gap, 1 accept, 2 release, 3 reject, 4 renew. A batch
carries one type for its whole range or one per offset.

What Yak adds, inside Kafka's extension points so that a Kafka parser skips it:

- ``YAK_SHARE_FILTER_TAG`` on the ShareFetch request body: the request's record filter
  (``yak.filters``), UTF-8; the leader acquires only records it accepts and acknowledges the
  others (docs/decisions.md, "Server-side filters").
- ``YAK_ACQUIRE_MODE_TAG`` on the ShareFetch request body: one byte, KIP-1206's
  ``ShareAcquireMode`` (``AcquireMode``: 0 ``batch_optimized``, the leader acquires to the end
  of the last batch it answers, so ``max_records`` is soft; 1 ``record_limit``, at most
  ``max_records``). Kafka carries it as a field of ShareFetch v2; without the tag the internal
  plane means ``record_limit``.
- Partition errors keep their Yak identity as in ``kafka_wire`` (``YAK_ERROR_TAG``); the
  acknowledgement error of a ShareFetch partition under ``YAK_ACK_ERROR_TAG``.
- ``YAK_ACK_REFUSED_TAG`` on a partition of either answer: which of the request's
  acknowledgement batches for that partition were refused (uvarint count, then each batch's
  index, ascending); the others were applied. Kafka answers one acknowledgement error per
  partition, so a request could only carry one batch per partition and still tell which one
  failed; with the indices a partition's every batch goes in one request. An error without the
  tag (a broker that does not send it) says nothing of which batch: all are treated as refused.

Share sessions (KIP-932's epochs) are the Kafka listener's business: on the internal plane
the proxy sends epoch ``-1`` ("no session": every request names its partitions). Decoders never
return a partial result: anything malformed raises ``InvalidRequestError`` naming the field.
Record bytes are never copied (``memoryview`` slices of the frame; separate parts when
encoding). Pure functions; safe from any thread.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from enum import IntEnum
from typing import NamedTuple

from yak.errors import InvalidRequestError, error_for_kafka_code
from yak.protocol.broker_wire import Buffer, PartitionError
from yak.protocol.kafka_errors import (
    YAK_ERROR_TAG,
    as_partition_error,
    identity_payload,
    kafka_error_code,
)
from yak.protocol.kafka_types import (
    EMPTY_TAGS,
    I16,
    I32,
    SIZE,
    Reader,
    compact_string,
    tags,
    uvarint,
)
from yak.protocol.kafka_wire import request_header, response_header

__all__ = [
    "API_SHARE_ACKNOWLEDGE",
    "API_SHARE_FETCH",
    "NO_SESSION",
    "SHARE_ACKNOWLEDGE_VERSION",
    "SHARE_FETCH_VERSION",
    "YAK_ACK_ERROR_TAG",
    "YAK_ACK_REFUSED_TAG",
    "YAK_ACQUIRE_MODE_TAG",
    "YAK_SHARE_FILTER_TAG",
    "AckBatch",
    "AckResult",
    "AckType",
    "AcquireMode",
    "AcquiredRecords",
    "ShareAcknowledgeRequest",
    "ShareFetchRequest",
    "ShareFetchResponse",
    "ShareFetchedPartition",
    "SharePartitionAcks",
    "decode_share_acknowledge_request",
    "decode_share_acknowledge_response",
    "decode_share_fetch_request",
    "decode_share_fetch_response",
    "encode_share_acknowledge_request",
    "encode_share_acknowledge_response",
    "encode_share_fetch_request",
    "encode_share_fetch_response",
]

API_SHARE_FETCH = 78
API_SHARE_ACKNOWLEDGE = 79
SHARE_FETCH_VERSION = 1
SHARE_ACKNOWLEDGE_VERSION = 1
#: ``share_session_epoch`` of a request outside any share session (the internal plane's).
NO_SESSION = -1
YAK_SHARE_FILTER_TAG = 0x7963
YAK_ACK_ERROR_TAG = 0x7964
YAK_ACK_REFUSED_TAG = 0x7965
YAK_ACQUIRE_MODE_TAG = 0x7966

_FETCH_TOP = struct.Struct(
    ">iiiiii"
)  # session epoch, max wait, min bytes, max bytes, records, batch
_RANGE = struct.Struct(">qq")
_ACQUIRED = struct.Struct(">qqh")
_LEADER = struct.Struct(">ii")
_RESULT_TOP = struct.Struct(">ih")  # throttle_time_ms, error_code


class AckType(IntEnum):
    """What a consumer says of a record (Kafka's numbers)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class AcquireMode(IntEnum):
    """How a ShareFetch bounds what it acquires (KIP-1206's ``ShareAcquireMode``)."""

    BATCH_OPTIMIZED = 0
    RECORD_LIMIT = 1


class AckBatch(NamedTuple):
    """Offsets ``first_offset..last_offset`` (inclusive) and their acknowledge types: one for
    the whole range, or one per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


class SharePartitionAcks(NamedTuple):
    """One partition of a share request, with the acknowledgements it carries (maybe none)."""

    topic_id: uuid.UUID
    partition: int
    acks: tuple[AckBatch, ...] = ()


class ShareFetchRequest(NamedTuple):
    group_id: str
    member_id: str
    partitions: tuple[SharePartitionAcks, ...]
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 50 * 1024 * 1024
    max_records: int = 500
    batch_size: int = 500
    session_epoch: int = NO_SESSION
    forgotten: tuple[tuple[uuid.UUID, int], ...] = ()
    #: The request's record filter (``yak.filters``); None: every record.
    filter: str | None = None
    acquire_mode: AcquireMode = AcquireMode.RECORD_LIMIT


class AcquiredRecords(NamedTuple):
    """Offsets ``first_offset..last_offset`` acquired by the member, each delivered for the
    ``delivery_count``-th time."""

    first_offset: int
    last_offset: int
    delivery_count: int


class ShareFetchedPartition(NamedTuple):
    """One partition of a ShareFetch answer: whole batches (``records``) and which of their
    records the member now holds (``acquired``); the rest of the batches is not its to use."""

    topic_id: uuid.UUID
    partition: int
    records: Buffer = b""
    acquired: tuple[AcquiredRecords, ...] = ()
    error: PartitionError | None = None
    #: Why the acknowledgements sent with the request were refused (None: applied).
    ack_error: PartitionError | None = None
    leader_id: int = -1
    leader_epoch: int = -1
    #: With ``ack_error``: the indices of the refused batches (``YAK_ACK_REFUSED_TAG``).
    ack_refused: tuple[int, ...] = ()


class ShareFetchResponse(NamedTuple):
    partitions: tuple[ShareFetchedPartition, ...]
    lock_timeout_ms: int = 0
    #: Kafka's number for a request-level error (0: none), and its message.
    error_code: int = 0
    error_message: str | None = None


class ShareAcknowledgeRequest(NamedTuple):
    group_id: str
    member_id: str
    partitions: tuple[SharePartitionAcks, ...]
    session_epoch: int = NO_SESSION


class AckResult(NamedTuple):
    """One partition's answer to ShareAcknowledge (``error`` None: every batch applied)."""

    topic_id: uuid.UUID
    partition: int
    error: PartitionError | None = None
    leader_id: int = -1
    leader_epoch: int = -1
    #: With ``error``: the indices of the refused batches (``YAK_ACK_REFUSED_TAG``).
    refused: tuple[int, ...] = ()


# --- shared pieces ----------------------------------------------------------------------------


def _by_topic_id(
    items: Sequence[SharePartitionAcks | ShareFetchedPartition | AckResult],
) -> dict[uuid.UUID, list[int]]:
    grouped: dict[uuid.UUID, list[int]] = {}
    for index, item in enumerate(items):
        grouped.setdefault(item.topic_id, []).append(index)
    return grouped


def _encode_acks(acks: Sequence[AckBatch]) -> bytes:
    out = bytearray(uvarint(len(acks) + 1))
    for batch in acks:
        out += _RANGE.pack(batch.first_offset, batch.last_offset)
        out += uvarint(len(batch.types) + 1) + bytes(t & 0xFF for t in batch.types)
        out += EMPTY_TAGS
    return bytes(out)


def _decode_acks(reader: Reader, where: str) -> tuple[AckBatch, ...]:
    batches: list[AckBatch] = []
    for b in range(reader.array_length(f"{where}.acknowledgement_batches")):
        at = f"{where}.acknowledgement_batches[{b}]"
        first, last = reader.unpack(_RANGE, at)
        count = reader.array_length(f"{at}.acknowledge_types")
        types = tuple(reader.unpack(struct.Struct(f">{count}b"), f"{at}.acknowledge_types"))
        reader.tags(at)
        if first < 0 or last < first:
            raise InvalidRequestError(f"{at}: needs 0 <= first_offset <= last_offset")
        if len(types) not in (1, last - first + 1):
            raise InvalidRequestError(
                f"{at}: acknowledge_types needs one type or one per offset ({last - first + 1})"
            )
        if any(t not in AckType._value2member_map_ for t in types):
            raise InvalidRequestError(f"{at}: acknowledge types are 0-4, got {list(types)}")
        batches.append(AckBatch(first, last, types))
    return tuple(batches)


def _decode_uuid(reader: Reader, where: str) -> uuid.UUID:
    start = reader.pos
    reader.unpack(_RANGE, where)  # 16 bytes, bounds-checked
    return uuid.UUID(bytes=bytes(reader.view[start : start + 16]))


def _decode_partitions(reader: Reader) -> tuple[SharePartitionAcks, ...]:
    partitions: list[SharePartitionAcks] = []
    for t in range(reader.array_length("topics")):
        topic_id = _decode_uuid(reader, f"topics[{t}].topic_id")
        for i in range(reader.array_length(f"topics[{t}].partitions")):
            where = f"topics[{t}].partitions[{i}]"
            partition = reader.int32(f"{where}.partition_index")
            if partition < 0:
                raise InvalidRequestError(f"{where}: partition_index must be >= 0")
            partitions.append(SharePartitionAcks(topic_id, partition, _decode_acks(reader, where)))
            reader.tags(where)
        reader.tags(f"topics[{t}]")
    keys = {(p.topic_id, p.partition) for p in partitions}
    if len(keys) != len(partitions):
        raise InvalidRequestError("topics: a partition is named twice")
    return tuple(partitions)


def _encode_partitions(partitions: Sequence[SharePartitionAcks]) -> bytes:
    out = bytearray()
    grouped = _by_topic_id(partitions)
    out += uvarint(len(grouped) + 1)
    for topic_id, indexes in grouped.items():
        out += topic_id.bytes + uvarint(len(indexes) + 1)
        for index in indexes:
            p = partitions[index]
            out += I32.pack(p.partition) + _encode_acks(p.acks) + EMPTY_TAGS
        out += EMPTY_TAGS
    return bytes(out)


def _error_fields(error: PartitionError | None) -> bytes:
    return I16.pack(kafka_error_code(error)) + compact_string(error.message if error else None)


def _member_fields(group_id: str, member_id: str) -> bytes:
    return compact_string(group_id) + compact_string(member_id)


def _decode_member(reader: Reader) -> tuple[str, str]:
    group_id = reader.string("group_id")
    member_id = reader.string("member_id")
    if not group_id or not member_id:
        raise InvalidRequestError("group_id and member_id must be non-empty")
    return group_id, member_id


def _sized(parts: list[Buffer]) -> list[Buffer]:
    total = sum(len(memoryview(part)) for part in parts)
    parts[0] = SIZE.pack(total) + bytes(parts[0])
    return parts


# --- ShareFetch -------------------------------------------------------------------------------


def encode_share_fetch_request(
    request: ShareFetchRequest, correlation_id: int, client_id: str = "yak"
) -> list[Buffer]:
    out = bytearray(request_header(API_SHARE_FETCH, SHARE_FETCH_VERSION, correlation_id, client_id))
    out += _member_fields(request.group_id, request.member_id)
    out += _FETCH_TOP.pack(
        request.session_epoch,
        request.max_wait_ms,
        request.min_bytes,
        request.max_bytes,
        request.max_records,
        request.batch_size,
    )
    out += _encode_partitions(request.partitions)
    forgotten: dict[uuid.UUID, list[int]] = {}
    for topic_id, partition in request.forgotten:
        forgotten.setdefault(topic_id, []).append(partition)
    out += uvarint(len(forgotten) + 1)
    for topic_id, indexes in forgotten.items():
        out += topic_id.bytes + uvarint(len(indexes) + 1)
        out += b"".join(I32.pack(index) for index in indexes) + EMPTY_TAGS
    extra = {} if request.filter is None else {YAK_SHARE_FILTER_TAG: request.filter.encode()}
    if request.acquire_mode != AcquireMode.RECORD_LIMIT:
        extra[YAK_ACQUIRE_MODE_TAG] = bytes((request.acquire_mode,))
    out += tags(extra)
    return [SIZE.pack(len(out)) + out]


def decode_share_fetch_request(body: Buffer) -> ShareFetchRequest:
    reader = Reader(body, "share fetch request")
    group_id, member_id = _decode_member(reader)
    epoch, max_wait_ms, min_bytes, max_bytes, max_records, batch_size = reader.unpack(
        _FETCH_TOP, "request"
    )
    for name, value, low in (
        ("share_session_epoch", epoch, -1),
        ("max_wait_ms", max_wait_ms, 0),
        ("min_bytes", min_bytes, 0),
        ("max_bytes", max_bytes, 1),
        ("max_records", max_records, 1),
        ("batch_size", batch_size, 1),
    ):
        if value < low:
            raise InvalidRequestError(f"request.{name} must be >= {low}, got {value}")
    partitions = _decode_partitions(reader)
    forgotten: list[tuple[uuid.UUID, int]] = []
    for f in range(reader.array_length("forgotten_topics_data")):
        topic_id = _decode_uuid(reader, f"forgotten_topics_data[{f}].topic_id")
        for _ in range(reader.array_length(f"forgotten_topics_data[{f}].partitions")):
            forgotten.append((topic_id, reader.int32(f"forgotten_topics_data[{f}].partitions")))
        reader.tags(f"forgotten_topics_data[{f}]")
    found = reader.tags("share fetch request")
    raw_filter = found.get(YAK_SHARE_FILTER_TAG)
    reader.end()
    mode = AcquireMode.RECORD_LIMIT
    raw_mode = found.get(YAK_ACQUIRE_MODE_TAG)
    if raw_mode is not None:
        if len(raw_mode) != 1 or raw_mode[0] not in AcquireMode._value2member_map_:
            raise InvalidRequestError(f"acquire mode must be 0 or 1, got {bytes(raw_mode)!r}")
        mode = AcquireMode(raw_mode[0])
    text: str | None = None
    if raw_filter is not None:
        try:
            text = str(raw_filter, "utf-8")
        except UnicodeDecodeError:
            raise InvalidRequestError("the request's filter is not UTF-8") from None
    return ShareFetchRequest(
        group_id,
        member_id,
        partitions,
        max_wait_ms,
        min_bytes,
        max_bytes,
        max_records,
        batch_size,
        epoch,
        tuple(forgotten),
        text,
        mode,
    )


def _partition_tags(
    error: PartitionError | None, ack_error: PartitionError | None, refused: Sequence[int]
) -> bytes:
    extra: dict[int, bytes] = {}
    for tag, which in ((YAK_ERROR_TAG, error), (YAK_ACK_ERROR_TAG, ack_error)):
        payload = identity_payload(which)
        if payload is not None:
            extra[tag] = payload
    if refused:
        extra[YAK_ACK_REFUSED_TAG] = b"".join(map(uvarint, (len(refused), *refused)))
    return tags(extra)


def _refused(found: dict[int, memoryview], where: str) -> tuple[int, ...]:
    payload = found.get(YAK_ACK_REFUSED_TAG)
    if payload is None:
        return ()
    reader = Reader(payload, where)
    count = reader.uvarint("refused batches")
    indices = tuple(reader.uvarint("refused batch") for _ in range(count))
    reader.end()
    return indices


def encode_share_fetch_response(correlation_id: int, response: ShareFetchResponse) -> list[Buffer]:
    """The answer, record bytes uncopied (each partition's records a part of its own)."""
    parts: list[Buffer] = []
    pending = bytearray(response_header(correlation_id, True))
    pending += _RESULT_TOP.pack(0, response.error_code)
    pending += compact_string(response.error_message) + I32.pack(response.lock_timeout_ms)
    grouped = _by_topic_id(response.partitions)
    pending += uvarint(len(grouped) + 1)
    for topic_id, indexes in grouped.items():
        pending += topic_id.bytes + uvarint(len(indexes) + 1)
        for index in indexes:
            p = response.partitions[index]
            pending += I32.pack(p.partition) + _error_fields(p.error) + _error_fields(p.ack_error)
            pending += _LEADER.pack(p.leader_id, p.leader_epoch) + EMPTY_TAGS
            size = len(memoryview(p.records))
            pending += uvarint(size + 1)
            if size:
                parts.append(bytes(pending))
                parts.append(p.records)
                pending = bytearray()
            pending += uvarint(len(p.acquired) + 1)
            for acquired in p.acquired:
                pending += _ACQUIRED.pack(*acquired) + EMPTY_TAGS
            pending += _partition_tags(p.error, p.ack_error, p.ack_refused)
        pending += EMPTY_TAGS
    pending += b"\x01"  # node_endpoints: [] (the proxy has the cluster's metadata)
    pending += EMPTY_TAGS
    parts.append(bytes(pending))
    return _sized(parts)


def _decode_error(reader: Reader, where: str) -> tuple[int, str | None]:
    return reader.int16(f"{where}.error_code"), reader.compact_string(f"{where}.error_message")


def _skip_node_endpoints(reader: Reader) -> None:
    for n in range(reader.array_length("node_endpoints", nullable=True)):
        reader.int32(f"node_endpoints[{n}].node_id")
        reader.string(f"node_endpoints[{n}].host")
        reader.int32(f"node_endpoints[{n}].port")
        reader.compact_string(f"node_endpoints[{n}].rack")
        reader.tags(f"node_endpoints[{n}]")


def decode_share_fetch_response(body: Buffer) -> ShareFetchResponse:
    reader = Reader(body, "share fetch response")
    _throttle, error_code = reader.unpack(_RESULT_TOP, "response")
    error_message = reader.compact_string("error_message")
    lock_timeout_ms = reader.int32("acquisition_lock_timeout_ms")
    partitions: list[ShareFetchedPartition] = []
    for t in range(reader.array_length("responses")):
        topic_id = _decode_uuid(reader, f"responses[{t}].topic_id")
        for i in range(reader.array_length(f"responses[{t}].partitions")):
            where = f"responses[{t}].partitions[{i}]"
            partition = reader.int32(f"{where}.partition_index")
            code, message = _decode_error(reader, where)
            ack_code, ack_message = _decode_error(reader, f"{where}.acknowledge")
            leader_id, leader_epoch = reader.unpack(_LEADER, f"{where}.current_leader")
            reader.tags(f"{where}.current_leader")
            records = reader.compact_bytes(f"{where}.records")
            acquired = []
            for a in range(reader.array_length(f"{where}.acquired_records")):
                acquired.append(
                    AcquiredRecords(*reader.unpack(_ACQUIRED, f"{where}.acquired_records[{a}]"))
                )
                reader.tags(f"{where}.acquired_records[{a}]")
            found = reader.tags(where)
            partitions.append(
                ShareFetchedPartition(
                    topic_id,
                    partition,
                    records if records is not None else b"",
                    tuple(acquired),
                    as_partition_error(code, message, found),
                    as_partition_error(ack_code, ack_message, found, YAK_ACK_ERROR_TAG),
                    leader_id,
                    leader_epoch,
                    _refused(found, where),
                )
            )
        reader.tags(f"responses[{t}]")
    _skip_node_endpoints(reader)
    reader.tags("share fetch response")
    reader.end()
    return ShareFetchResponse(tuple(partitions), lock_timeout_ms, error_code, error_message)


# --- ShareAcknowledge -------------------------------------------------------------------------


def encode_share_acknowledge_request(
    request: ShareAcknowledgeRequest, correlation_id: int, client_id: str = "yak"
) -> list[Buffer]:
    out = bytearray(
        request_header(API_SHARE_ACKNOWLEDGE, SHARE_ACKNOWLEDGE_VERSION, correlation_id, client_id)
    )
    out += _member_fields(request.group_id, request.member_id)
    out += I32.pack(request.session_epoch)
    out += _encode_partitions(request.partitions)
    out += EMPTY_TAGS
    return [SIZE.pack(len(out)) + out]


def decode_share_acknowledge_request(body: Buffer) -> ShareAcknowledgeRequest:
    reader = Reader(body, "share acknowledge request")
    group_id, member_id = _decode_member(reader)
    epoch = reader.int32("share_session_epoch")
    if epoch < -1:
        raise InvalidRequestError(f"request.share_session_epoch must be >= -1, got {epoch}")
    partitions = _decode_partitions(reader)
    reader.tags("share acknowledge request")
    reader.end()
    if not partitions:
        raise InvalidRequestError("topics must name at least one partition")
    return ShareAcknowledgeRequest(group_id, member_id, partitions, epoch)


def encode_share_acknowledge_response(
    correlation_id: int, results: Sequence[AckResult], *, error_code: int = 0
) -> list[Buffer]:
    out = bytearray(response_header(correlation_id, True))
    out += _RESULT_TOP.pack(0, error_code) + compact_string(None)
    grouped = _by_topic_id(results)
    out += uvarint(len(grouped) + 1)
    for topic_id, indexes in grouped.items():
        out += topic_id.bytes + uvarint(len(indexes) + 1)
        for index in indexes:
            r = results[index]
            out += I32.pack(r.partition) + _error_fields(r.error)
            out += _LEADER.pack(r.leader_id, r.leader_epoch) + EMPTY_TAGS
            out += _partition_tags(r.error, None, r.refused)
        out += EMPTY_TAGS
    out += b"\x01" + EMPTY_TAGS  # node_endpoints: []
    return [SIZE.pack(len(out)) + out]


def decode_share_acknowledge_response(body: Buffer) -> tuple[AckResult, ...]:
    """The partitions' results; a request-level error code raises its error."""
    reader = Reader(body, "share acknowledge response")
    _throttle, error_code = reader.unpack(_RESULT_TOP, "response")
    error_message = reader.compact_string("error_message")
    results: list[AckResult] = []
    for t in range(reader.array_length("responses")):
        topic_id = _decode_uuid(reader, f"responses[{t}].topic_id")
        for i in range(reader.array_length(f"responses[{t}].partitions")):
            where = f"responses[{t}].partitions[{i}]"
            partition = reader.int32(f"{where}.partition_index")
            code, message = _decode_error(reader, where)
            leader_id, leader_epoch = reader.unpack(_LEADER, f"{where}.current_leader")
            reader.tags(f"{where}.current_leader")
            found = reader.tags(where)
            results.append(
                AckResult(
                    topic_id,
                    partition,
                    as_partition_error(code, message, found),
                    leader_id,
                    leader_epoch,
                    _refused(found, where),
                )
            )
        reader.tags(f"responses[{t}]")
    _skip_node_endpoints(reader)
    reader.tags("share acknowledge response")
    reader.end()
    if error_code != 0:
        raise error_for_kafka_code(error_code, error_message or "the acknowledgement was refused")
    return tuple(results)
