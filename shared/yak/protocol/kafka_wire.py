"""The internal data plane in Kafka's framing and Kafka's message schemas (pure: no asyncio).

Proxy → broker produce and fetch, and follower → leader replication, travel over persistent
TCP connections to each broker's internal listener, as Kafka's own clients and brokers talk:
every message is a frame ``int32 size`` + header + body, requests carry a correlation id that
their response repeats. The schemas are Kafka's, byte for byte, so the public Kafka listener
(DESIGN §11) can share this module:

=======================  ====  =======  =====================================================
message                  key   version  header (request / response)
=======================  ====  =======  =====================================================
Produce                  0     9        v2 / v1 (flexible: compact strings, tagged fields)
Fetch                    1     12       v2 / v1 (flexible)
SaslHandshake            17    1        v1 / v0
SaslAuthenticate         36    2        v2 / v1 (flexible)
=======================  ====  =======  =====================================================

Request header v2: ``api_key int16, api_version int16, correlation_id int32, client_id
nullable string (int16 length), tagged fields``. Response header v1: ``correlation_id int32,
tagged fields``. The field lists of each body are in the encoders below, in Kafka's order;
``tests/unit/shared/protocol/test_kafka_wire.py`` checks every encoder against an independent
implementation of Kafka's schemas (``kio``).

What Yak adds, inside Kafka's extension points so that a Kafka parser skips it:

- **Errors keep their Yak identity.** A partition's ``error_code`` is Kafka's number
  (``YakError.kafka_code``) and ``error_message`` the message; the error's stable Yak code and
  its details (``expected_sequence``, ``log_start_offset`` ...) ride in tagged field
  ``YAK_ERROR_TAG`` of the partition as JSON ``{"code", "details"}``.
- **Request-level errors** (a malformed or oversized request: nothing of it was applied) come
  back as a response whose header carries ``YAK_ERROR_TAG`` and whose body is empty.
- **Responses may come out of order** on the internal plane: the listener serves a
  connection's requests concurrently (a parked long-poll fetch must not hold back a produce
  behind it) and the client matches answers by correlation id. Kafka's public listener
  answers in order; that is the listener's choice, not the format's.

Decoders never return a partial result: anything malformed raises ``InvalidRequestError``
naming the field. Record bytes are never copied by a decoder (``memoryview`` slices of the
frame) and never by an encoder (they are separate parts, written with ``writelines``).
Pure functions; the primitives and ``FrameSplitter`` are in ``kafka_types``, the SASL messages
in ``kafka_sasl``. Safe from any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import orjson

from yak.errors import InvalidRequestError, YakError, error_for_code, error_for_kafka_code
from yak.protocol.broker_wire import (
    ACKS_ALL,
    Buffer,
    FetchedPartition,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ProducePartition,
    ProduceRequest,
    ProduceResult,
    check_unique,
)
from yak.protocol.kafka_errors import (
    YAK_ERROR_TAG,
    as_partition_error,
    error_tags,
    kafka_error_code,
)
from yak.protocol.kafka_types import (
    EMPTY_TAGS,
    I16,
    I32,
    MAX_FRAME_BYTES,
    SIZE,
    FrameSplitter,
    FrameTooLargeError,
    Reader,
    compact_string,
    tags,
    uvarint,
)

__all__ = [
    "API_FETCH",
    "API_PRODUCE",
    "API_SASL_AUTHENTICATE",
    "API_SASL_HANDSHAKE",
    "FETCH_VERSION",
    "MAX_FRAME_BYTES",
    "PRODUCE_VERSION",
    "YAK_ERROR_TAG",
    "FrameSplitter",
    "FrameTooLargeError",
    "RequestHeader",
    "ResponseHeader",
    "decode_fetch_request",
    "decode_fetch_response",
    "decode_fetch_session_response",
    "decode_produce_request",
    "decode_produce_response",
    "decode_request_header",
    "decode_response_header",
    "encode_fetch_request",
    "encode_fetch_response",
    "encode_produce_request",
    "encode_produce_response",
    "error_response",
    "flexible",
    "frame",
    "request_header",
    "response_header",
]

API_PRODUCE = 0
API_FETCH = 1
API_SASL_HANDSHAKE = 17
API_SASL_AUTHENTICATE = 36
PRODUCE_VERSION = 9
FETCH_VERSION = 12
SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2
#: A fetch request's tagged field: the follower's data folder id (``replica_log_dir_id``),
#: UTF-8; a Kafka client never sends it and an older broker skips it.
YAK_REPLICA_LOG_DIR_TAG = 0x7962

_HEADER_V2 = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_PRODUCE_PARTITION_RESULT = struct.Struct(">ihqqq")  # index, error, base, append time, start
_FETCH_TOP = struct.Struct(">iiiibii")  # replica, max_wait, min_bytes, max_bytes, iso, session
_FETCH_PARTITION = struct.Struct(">iiqiqi")  # partition, epoch, offset, last epoch, start, max
_FETCH_RESULT_TOP = struct.Struct(">ihi")  # throttle, error_code, session_id
_FETCH_PARTITION_RESULT = struct.Struct(">ihqqq")  # index, error, hw, lso, log start
#: The first flexible version of each message (ShareFetch 78 and ShareAcknowledge 79: all).
_FLEXIBLE = {API_PRODUCE: 9, API_FETCH: 12, API_SASL_AUTHENTICATE: 2, 78: 0, 79: 0}


def flexible(api_key: int, api_version: int) -> bool:
    """Whether a message version uses Kafka's flexible encoding (and header v2 / v1)."""
    first = _FLEXIBLE.get(api_key)
    return first is not None and api_version >= first


def _check_name(topic: str, where: str) -> str:
    if not topic:
        raise InvalidRequestError(f"{where}: topic must be a non-empty string")
    return topic


def _by_topic(items: Iterable[Any]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for item in items:
        grouped.setdefault(item.topic, []).append(item)
    return grouped


# --- frames and headers -----------------------------------------------------------------------


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


class ResponseHeader(NamedTuple):
    correlation_id: int
    #: A request-level error (the request was refused whole), from ``YAK_ERROR_TAG``.
    error: YakError | None = None


def frame(header: bytes, body: Sequence[Buffer]) -> list[Buffer]:
    """A whole frame as parts to write in order: size, header, body parts (uncopied)."""
    size = len(header)
    for part in body:
        size += len(memoryview(part))
    return [SIZE.pack(size) + header, *body]


def request_header(api_key: int, api_version: int, correlation_id: int, client_id: str) -> bytes:
    client = client_id.encode()
    head = _HEADER_V2.pack(api_key, api_version, correlation_id, len(client)) + client
    return head + EMPTY_TAGS if flexible(api_key, api_version) else head


def decode_request_header(data: Buffer) -> tuple[RequestHeader, memoryview]:
    """The header of a request frame and its body."""
    reader = Reader(data, "request header")
    api_key, api_version, correlation_id = reader.unpack(struct.Struct(">hhi"), "header")
    client_id = reader.nullable_string16("client_id")
    if flexible(api_key, api_version):
        reader.tags("header")
    return RequestHeader(api_key, api_version, correlation_id, client_id), reader.view[reader.pos :]


def response_header(correlation_id: int, is_flexible: bool, error: YakError | None = None) -> bytes:
    head = I32.pack(correlation_id)
    if not is_flexible:
        return head
    if error is None:
        return head + EMPTY_TAGS
    payload = orjson.dumps({"code": error.code, "message": error.message, "details": error.details})
    return head + tags({YAK_ERROR_TAG: payload})


def decode_response_header(data: Buffer, *, is_flexible: bool) -> tuple[ResponseHeader, memoryview]:
    reader = Reader(data, "response header")
    correlation_id = reader.int32("correlation_id")
    error: YakError | None = None
    if is_flexible:
        extra = reader.tags("header").get(YAK_ERROR_TAG)
        if extra is not None:
            try:
                payload = orjson.loads(extra)
            except orjson.JSONDecodeError:
                raise InvalidRequestError("response header: a malformed error tag") from None
            if isinstance(payload, dict) and isinstance(payload.get("code"), str):
                details = payload.get("details")
                error = error_for_code(
                    payload["code"],
                    str(payload.get("message", "")),
                    **(details if isinstance(details, dict) else {}),
                )
    return ResponseHeader(correlation_id, error), reader.view[reader.pos :]


def error_response(correlation_id: int, error: YakError) -> list[Buffer]:
    """A request-level error: a flexible response header with ``YAK_ERROR_TAG``, no body."""
    return frame(response_header(correlation_id, True, error), ())


# --- produce v9 -------------------------------------------------------------------------------


def encode_produce_request(
    request: ProduceRequest, correlation_id: int, client_id: str = "yak"
) -> list[Buffer]:
    """``transactional_id, acks int16, timeout_ms int32, topic_data [name, partition_data
    [index int32, records]]`` — the record bytes are parts of their own."""
    parts: list[Buffer] = []
    head = bytearray(request_header(API_PRODUCE, PRODUCE_VERSION, correlation_id, client_id))
    head += b"\x00"  # transactional_id: null
    head += I16.pack(request.acks) + I32.pack(request.timeout_ms)
    grouped = _by_topic(request.partitions)
    head += uvarint(len(grouped) + 1)
    pending = head
    for topic, partitions in grouped.items():
        pending += compact_string(topic) + uvarint(len(partitions) + 1)
        for p in partitions:
            records = p.records
            pending += I32.pack(p.partition) + uvarint(len(memoryview(records)) + 1)
            parts.append(bytes(pending))
            parts.append(records)
            pending = bytearray(EMPTY_TAGS)  # the partition's tagged fields
        pending += EMPTY_TAGS  # the topic's
    pending += EMPTY_TAGS  # the request's
    parts.append(bytes(pending))
    size = sum(len(memoryview(part)) for part in parts)
    parts[0] = SIZE.pack(size) + bytes(parts[0])  # bytes(bytes) is the same object
    return parts


def decode_produce_request(body: Buffer) -> ProduceRequest:
    """Parse a Produce v9 body (after the header); ``records`` are slices of ``body``."""
    reader = Reader(body, "produce request")
    reader.compact_string("transactional_id")
    acks = reader.int16("acks")
    if acks not in (0, 1, ACKS_ALL):
        raise InvalidRequestError(f"acks must be 0, 1 or -1 (all), got {acks}", acks=acks)
    timeout_ms = reader.int32("timeout_ms")
    if timeout_ms < 0:
        raise InvalidRequestError(f"timeout_ms must be >= 0, got {timeout_ms}")
    partitions: list[ProducePartition] = []
    for t in range(reader.array_length("topic_data")):
        topic = _check_name(reader.string(f"topic_data[{t}].name"), f"topic_data[{t}]")
        for i in range(reader.array_length(f"topic_data[{t}].partition_data")):
            where = f"topic_data[{t}].partition_data[{i}]"
            index = reader.int32(f"{where}.index")
            if index < 0:
                raise InvalidRequestError(f"{where}.index must be >= 0, got {index}")
            records = reader.compact_bytes(f"{where}.records")
            reader.tags(where)
            partitions.append(ProducePartition(topic, index, records or memoryview(b"")))
        reader.tags(f"topic_data[{t}]")
    reader.tags("produce request")
    reader.end()
    if not partitions:
        raise InvalidRequestError("partitions must be a non-empty list")
    check_unique(partitions)
    return ProduceRequest(tuple(partitions), acks, timeout_ms)


def encode_produce_response(
    correlation_id: int,
    results: Sequence[ProduceResult],
    *,
    throttle_ms: int = 0,
    yak_tags: bool = True,
) -> list[Buffer]:
    """``responses [name, partition_responses [index, error_code, base_offset,
    log_append_time_ms, log_start_offset, record_errors [], error_message]], throttle_time_ms``.
    ``yak_tags`` False: no Yak tagged field on an error (the public Kafka listener's answers)."""
    out = bytearray(response_header(correlation_id, True))
    grouped = _by_topic(results)
    out += uvarint(len(grouped) + 1)
    for topic, entries in grouped.items():
        out += compact_string(topic) + uvarint(len(entries) + 1)
        for r in entries:
            error = r.error
            out += _PRODUCE_PARTITION_RESULT.pack(
                r.partition,
                kafka_error_code(error),
                r.base_offset,
                r.log_append_time,
                r.log_start_offset,
            )
            out += b"\x01"  # record_errors: empty
            out += compact_string(error.message if error is not None else None)
            out += error_tags(error) if yak_tags else EMPTY_TAGS
        out += EMPTY_TAGS
    out += I32.pack(throttle_ms) + EMPTY_TAGS  # throttle_time_ms, tags
    return [SIZE.pack(len(out)) + out]


def decode_produce_response(body: Buffer) -> tuple[ProduceResult, ...]:
    reader = Reader(body, "produce response")
    results: list[ProduceResult] = []
    for t in range(reader.array_length("responses")):
        topic = reader.string(f"responses[{t}].name")
        for i in range(reader.array_length(f"responses[{t}].partition_responses")):
            where = f"responses[{t}].partition_responses[{i}]"
            index, code, base, append_time, start = reader.unpack(_PRODUCE_PARTITION_RESULT, where)
            for e in range(reader.array_length(f"{where}.record_errors")):
                reader.int32(f"{where}.record_errors[{e}].batch_index")
                reader.compact_string(f"{where}.record_errors[{e}].message")
                reader.tags(f"{where}.record_errors[{e}]")
            message = reader.compact_string(f"{where}.error_message")
            tags = reader.tags(where)
            results.append(
                ProduceResult(
                    topic, index, base, append_time, start, as_partition_error(code, message, tags)
                )
            )
        reader.tags(f"responses[{t}]")
    reader.int32("throttle_time_ms")
    reader.tags("produce response")
    reader.end()
    return tuple(results)


# --- fetch v12 --------------------------------------------------------------------------------


def encode_fetch_request(
    request: FetchRequest, correlation_id: int, client_id: str = "yak"
) -> list[Buffer]:
    """``replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id,
    session_epoch, topics [topic, partitions [partition, current_leader_epoch, fetch_offset,
    last_fetched_epoch, log_start_offset, partition_max_bytes]], forgotten_topics_data [topic,
    partitions [int32]], rack_id`` — with the request's session fields (KIP-227)."""
    out = bytearray(request_header(API_FETCH, FETCH_VERSION, correlation_id, client_id))
    out += _FETCH_TOP.pack(
        request.replica_id,
        request.max_wait_ms,
        request.min_bytes,
        request.max_bytes,
        0,
        request.session_id,
        request.session_epoch,
    )
    grouped = _by_topic(request.partitions)
    out += uvarint(len(grouped) + 1)
    for topic, partitions in grouped.items():
        out += compact_string(topic) + uvarint(len(partitions) + 1)
        for p in partitions:
            out += _FETCH_PARTITION.pack(
                p.partition, p.current_leader_epoch, p.offset, -1, -1, p.max_bytes
            )
            out += EMPTY_TAGS
        out += EMPTY_TAGS
    forgotten: dict[str, list[int]] = {}
    for topic, partition in request.forgotten:
        forgotten.setdefault(topic, []).append(partition)
    out += uvarint(len(forgotten) + 1)
    for topic, indexes in forgotten.items():
        out += compact_string(topic) + uvarint(len(indexes) + 1)
        out += b"".join(I32.pack(index) for index in indexes)
        out += EMPTY_TAGS
    out += b"\x01"  # rack_id: ""
    log_dir = request.replica_log_dir_id.encode()
    out += tags({YAK_REPLICA_LOG_DIR_TAG: log_dir}) if log_dir else EMPTY_TAGS
    return [SIZE.pack(len(out)) + out]


def decode_fetch_request(body: Buffer) -> FetchRequest:
    reader = Reader(body, "fetch request")
    replica_id, max_wait_ms, min_bytes, max_bytes, _iso, session_id, session_epoch = reader.unpack(
        _FETCH_TOP, "request"
    )
    for name, value, low in (
        ("replica_id", replica_id, -1),
        ("session_id", session_id, 0),
        ("session_epoch", session_epoch, -1),
        ("max_wait_ms", max_wait_ms, 0),
        ("min_bytes", min_bytes, 0),
        ("max_bytes", max_bytes, 1),
    ):
        if value < low:
            raise InvalidRequestError(f"request.{name} must be >= {low}, got {value}")
    partitions: list[FetchPartition] = []
    for t in range(reader.array_length("topics")):
        topic = _check_name(reader.string(f"topics[{t}].topic"), f"topics[{t}]")
        for i in range(reader.array_length(f"topics[{t}].partitions")):
            where = f"topics[{t}].partitions[{i}]"
            partition, epoch, offset, _last, _start, part_max = reader.unpack(
                _FETCH_PARTITION, where
            )
            reader.tags(where)
            if partition < 0 or offset < 0 or part_max < 1 or epoch < -1:
                raise InvalidRequestError(
                    f"{where}: partition and fetch_offset must be >= 0, partition_max_bytes "
                    f">= 1 and current_leader_epoch >= -1"
                )
            partitions.append(FetchPartition(topic, partition, offset, part_max, epoch))
        reader.tags(f"topics[{t}]")
    forgotten: list[tuple[str, int]] = []
    for f in range(reader.array_length("forgotten_topics_data")):
        topic = reader.string(f"forgotten_topics_data[{f}].topic")
        for _ in range(reader.array_length(f"forgotten_topics_data[{f}].partitions")):
            forgotten.append((topic, reader.int32(f"forgotten_topics_data[{f}].partitions")))
        reader.tags(f"forgotten_topics_data[{f}]")
    reader.compact_string("rack_id")
    log_dir_tag = reader.tags("fetch request").get(YAK_REPLICA_LOG_DIR_TAG)
    reader.end()
    log_dir = bytes(log_dir_tag).decode("utf-8", "replace") if log_dir_tag is not None else ""
    if not partitions and session_epoch == -1:  # an incremental fetch may name none (idle)
        raise InvalidRequestError("partitions must be a non-empty list")
    check_unique(partitions)
    return FetchRequest(
        tuple(partitions),
        max_wait_ms,
        min_bytes,
        max_bytes,
        replica_id,
        session_id,
        session_epoch,
        tuple(forgotten),
        log_dir[:64],
    )


def encode_fetch_response(
    correlation_id: int,
    partitions: Sequence[FetchedPartition],
    *,
    session_id: int = 0,
    error_code: int = 0,
    throttle_time_ms: int = 0,
) -> list[Buffer]:
    """``throttle_time_ms, error_code, session_id, responses [topic, partitions
    [partition_index, error_code, high_watermark, last_stable_offset, log_start_offset,
    aborted_transactions, preferred_read_replica, records]]`` — records uncopied."""
    parts: list[Buffer] = []
    pending = bytearray(response_header(correlation_id, True))
    pending += _FETCH_RESULT_TOP.pack(throttle_time_ms, error_code, session_id)
    grouped = _by_topic(partitions)
    pending += uvarint(len(grouped) + 1)
    for topic, entries in grouped.items():
        pending += compact_string(topic) + uvarint(len(entries) + 1)
        for p in entries:
            error = p.error
            pending += _FETCH_PARTITION_RESULT.pack(
                p.partition,
                kafka_error_code(error),
                p.high_watermark,
                p.last_stable_offset,
                p.log_start_offset,
            )
            pending += b"\x00"  # aborted_transactions: null
            pending += I32.pack(-1)  # preferred_read_replica
            size = len(memoryview(p.records))
            pending += uvarint(size + 1)
            if size:
                parts.append(bytes(pending))
                parts.append(p.records)
                pending = bytearray()
            pending += error_tags(error)
        pending += EMPTY_TAGS
    pending += EMPTY_TAGS
    parts.append(bytes(pending))
    total = sum(len(memoryview(part)) for part in parts)
    parts[0] = SIZE.pack(total) + bytes(parts[0])  # bytes(bytes) is the same object
    return parts


def decode_fetch_response(body: Buffer) -> tuple[FetchedPartition, ...]:
    """The partitions of a fetch response; a request-level error code raises its error."""
    response = decode_fetch_session_response(body)
    if response.error_code != 0:
        raise error_for_kafka_code(response.error_code, "the fetch was refused")
    return response.partitions


def decode_fetch_session_response(body: Buffer) -> FetchResponse:
    """A fetch response with its session id and request-level error code (not raised)."""
    reader = Reader(body, "fetch response")
    _throttle, code, session_id = reader.unpack(_FETCH_RESULT_TOP, "response")
    result: list[FetchedPartition] = []
    for t in range(reader.array_length("responses")):
        topic = reader.string(f"responses[{t}].topic")
        for i in range(reader.array_length(f"responses[{t}].partitions")):
            where = f"responses[{t}].partitions[{i}]"
            index, error_code, hw, lso, start = reader.unpack(_FETCH_PARTITION_RESULT, where)
            for a in range(reader.array_length(f"{where}.aborted", nullable=True)):
                reader.unpack(struct.Struct(">qq"), f"{where}.aborted[{a}]")
                reader.tags(f"{where}.aborted[{a}]")
            reader.int32(f"{where}.preferred_read_replica")
            records = reader.compact_bytes(f"{where}.records")
            tags = reader.tags(where)
            result.append(
                FetchedPartition(
                    topic,
                    index,
                    hw,
                    lso,
                    start,
                    records if records is not None else memoryview(b""),
                    as_partition_error(error_code, None, tags) if error_code else None,
                )
            )
        reader.tags(f"responses[{t}]")
    reader.tags("fetch response")
    reader.end()
    return FetchResponse(tuple(result), session_id, code)
