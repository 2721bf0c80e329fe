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
Pure functions and a pure ``FrameSplitter``; safe from any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import orjson

from yak.errors import InvalidRequestError, YakError, error_for_code, error_for_kafka_code
from yak.protocol.broker_wire import (
    ACKS_ALL,
    Buffer,
    FetchedPartition,
    FetchPartition,
    FetchRequest,
    PartitionError,
    ProducePartition,
    ProduceRequest,
    ProduceResult,
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
    "decode_produce_request",
    "decode_produce_response",
    "decode_request_header",
    "decode_response_header",
    "decode_sasl_authenticate_request",
    "decode_sasl_authenticate_response",
    "decode_sasl_handshake_request",
    "decode_sasl_handshake_response",
    "encode_fetch_request",
    "encode_fetch_response",
    "encode_produce_request",
    "encode_produce_response",
    "encode_sasl_authenticate_request",
    "encode_sasl_authenticate_response",
    "encode_sasl_handshake_request",
    "encode_sasl_handshake_response",
    "error_response",
    "flexible",
    "frame",
]

API_PRODUCE = 0
API_FETCH = 1
API_SASL_HANDSHAKE = 17
API_SASL_AUTHENTICATE = 36
PRODUCE_VERSION = 9
FETCH_VERSION = 12
SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2
#: A tagged field number far above Kafka's own (which count up from 0).
YAK_ERROR_TAG = 0x7961
#: The largest frame either side accepts by default (a request beyond the broker's own limit
#: is refused with ``MESSAGE_TOO_LARGE``).
MAX_FRAME_BYTES = 1024 * 1024 * 1024

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_SIZE = _I32
_HEADER_V2 = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_PRODUCE_PARTITION_RESULT = struct.Struct(">ihqqq")  # index, error, base, append time, start
_FETCH_TOP = struct.Struct(">iiiibii")  # replica, max_wait, min_bytes, max_bytes, iso, session
_FETCH_PARTITION = struct.Struct(">iiqiqi")  # partition, epoch, offset, last epoch, start, max
_FETCH_RESULT_TOP = struct.Struct(">ihi")  # throttle, error_code, session_id
_FETCH_PARTITION_RESULT = struct.Struct(">ihqqq")  # index, error, hw, lso, log start
_EMPTY_TAGS = b"\x00"
_FLEXIBLE = {API_PRODUCE: 9, API_FETCH: 12, API_SASL_AUTHENTICATE: 2}


def flexible(api_key: int, api_version: int) -> bool:
    """Whether a message version uses Kafka's flexible encoding (and header v2 / v1)."""
    first = _FLEXIBLE.get(api_key)
    return first is not None and api_version >= first


# --- primitives -------------------------------------------------------------------------------


def _uvarint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _compact_string(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    data = text.encode()
    return _uvarint(len(data) + 1) + data


def _tags(fields: Mapping[int, bytes]) -> bytes:
    if not fields:
        return _EMPTY_TAGS
    out = [_uvarint(len(fields))]
    for tag in sorted(fields):
        data = fields[tag]
        out.append(_uvarint(tag) + _uvarint(len(data)) + data)
    return b"".join(out)


def _error_tags(error: PartitionError | None) -> bytes:
    """``YAK_ERROR_TAG`` when the Kafka number alone would lose something: details, or a Yak
    code that is not the one its Kafka number stands for."""
    if error is None:
        return _EMPTY_TAGS
    if not error.details and _canonical_code(error) == error.code:
        return _EMPTY_TAGS
    payload: dict[str, Any] = {"code": error.code}
    if error.details:
        payload["details"] = dict(error.details)
    return _tags({YAK_ERROR_TAG: orjson.dumps(payload)})


def _canonical_code(error: PartitionError) -> str:
    kafka_code = error.exception().kafka_code
    return error_for_kafka_code(kafka_code, "").code if kafka_code != -1 else ""


def _kafka_code(error: PartitionError | None) -> int:
    if error is None:
        return 0
    return error.exception().kafka_code


class _Reader:
    """Reads Kafka primitives from a memoryview; every overrun is an InvalidRequestError."""

    __slots__ = ("pos", "view", "what")

    def __init__(self, data: Buffer, what: str) -> None:
        self.view = memoryview(data)
        self.pos = 0
        self.what = what

    def _need(self, size: int, field: str) -> int:
        start = self.pos
        if size < 0 or start + size > len(self.view):
            raise InvalidRequestError(
                f"{self.what}: {field} runs past the end of the {len(self.view)}-byte message"
            )
        self.pos = start + size
        return start

    def unpack(self, form: struct.Struct, field: str) -> tuple[Any, ...]:
        return form.unpack_from(self.view, self._need(form.size, field))

    def int8(self, field: str) -> int:
        return int(_I8.unpack_from(self.view, self._need(1, field))[0])

    def int16(self, field: str) -> int:
        return int(_I16.unpack_from(self.view, self._need(2, field))[0])

    def int32(self, field: str) -> int:
        return int(_I32.unpack_from(self.view, self._need(4, field))[0])

    def int64(self, field: str) -> int:
        return int(_I64.unpack_from(self.view, self._need(8, field))[0])

    def uvarint(self, field: str) -> int:
        view, pos, shift, value = self.view, self.pos, 0, 0
        while True:
            if pos >= len(view) or shift > 28:
                raise InvalidRequestError(f"{self.what}: {field} is not a valid varint")
            byte = view[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                self.pos = pos
                return value
            shift += 7

    def compact_bytes(self, field: str) -> memoryview | None:
        length = self.uvarint(field) - 1
        if length < 0:
            return None
        start = self._need(length, field)
        return self.view[start : start + length]

    def compact_string(self, field: str) -> str | None:
        data = self.compact_bytes(field)
        if data is None:
            return None
        try:
            return str(data, "utf-8")
        except UnicodeDecodeError:
            raise InvalidRequestError(f"{self.what}: {field} is not UTF-8") from None

    def string(self, field: str) -> str:
        text = self.compact_string(field)
        if text is None:
            raise InvalidRequestError(f"{self.what}: {field} must not be null")
        return text

    def nullable_string16(self, field: str) -> str | None:
        length = self.int16(field)
        if length < 0:
            return None
        start = self._need(length, field)
        try:
            return str(self.view[start : start + length], "utf-8")
        except UnicodeDecodeError:
            raise InvalidRequestError(f"{self.what}: {field} is not UTF-8") from None

    def array_length(self, field: str, *, nullable: bool = False) -> int:
        count = self.uvarint(field) - 1
        if count < 0:
            if nullable:
                return 0
            raise InvalidRequestError(f"{self.what}: {field} must not be null")
        if count > len(self.view) - self.pos:  # each entry takes at least one byte
            raise InvalidRequestError(f"{self.what}: {field} claims {count} entries")
        return count

    def tags(self, field: str) -> dict[int, memoryview]:
        found: dict[int, memoryview] = {}
        for _ in range(self.uvarint(f"{field} tag count")):
            tag = self.uvarint(f"{field} tag")
            size = self.uvarint(f"{field} tag size")
            start = self._need(size, f"{field} tag {tag}")
            found[tag] = self.view[start : start + size]
        return found

    def end(self) -> None:
        if self.pos != len(self.view):
            raise InvalidRequestError(
                f"{self.what}: {len(self.view) - self.pos} bytes left over after the message"
            )


def _partition_error(code: int, message: str | None, tags: Mapping[int, Buffer]) -> YakError:
    extra = tags.get(YAK_ERROR_TAG)
    if extra is not None:
        try:
            payload = orjson.loads(extra)
        except orjson.JSONDecodeError:
            payload = None
        if isinstance(payload, dict) and isinstance(payload.get("code"), str):
            details = payload.get("details")
            return error_for_code(
                payload["code"], message or "", **(details if isinstance(details, dict) else {})
            )
    return error_for_kafka_code(code, message or "")


def _as_partition_error(
    code: int, message: str | None, tags: Mapping[int, Buffer]
) -> PartitionError | None:
    if code == 0:
        return None
    return PartitionError.of(_partition_error(code, message, tags))


def _check_name(topic: str, where: str) -> str:
    if not topic:
        raise InvalidRequestError(f"{where}: topic must be a non-empty string")
    return topic


def _check_unique(partitions: Sequence[ProducePartition | FetchPartition]) -> None:
    seen: set[tuple[str, int]] = set()
    for p in partitions:
        key = (p.topic, p.partition)
        if key in seen:
            raise InvalidRequestError(
                f"partition {p.topic}-{p.partition} appears twice in one request",
                topic=p.topic,
                partition=p.partition,
            )
        seen.add(key)


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
    return [_SIZE.pack(size) + header, *body]


def _request_header(api_key: int, api_version: int, correlation_id: int, client_id: str) -> bytes:
    client = client_id.encode()
    head = _HEADER_V2.pack(api_key, api_version, correlation_id, len(client)) + client
    return head + _EMPTY_TAGS if flexible(api_key, api_version) else head


def decode_request_header(data: Buffer) -> tuple[RequestHeader, memoryview]:
    """The header of a request frame and its body."""
    reader = _Reader(data, "request header")
    api_key, api_version, correlation_id = reader.unpack(struct.Struct(">hhi"), "header")
    client_id = reader.nullable_string16("client_id")
    if flexible(api_key, api_version):
        reader.tags("header")
    return RequestHeader(api_key, api_version, correlation_id, client_id), reader.view[reader.pos :]


def _response_header(
    correlation_id: int, is_flexible: bool, error: YakError | None = None
) -> bytes:
    head = _I32.pack(correlation_id)
    if not is_flexible:
        return head
    if error is None:
        return head + _EMPTY_TAGS
    payload = orjson.dumps({"code": error.code, "message": error.message, "details": error.details})
    return head + _tags({YAK_ERROR_TAG: payload})


def decode_response_header(data: Buffer, *, is_flexible: bool) -> tuple[ResponseHeader, memoryview]:
    reader = _Reader(data, "response header")
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
    return frame(_response_header(correlation_id, True, error), ())


# --- produce v9 -------------------------------------------------------------------------------


def encode_produce_request(
    request: ProduceRequest, correlation_id: int, client_id: str = "yak"
) -> list[Buffer]:
    """``transactional_id, acks int16, timeout_ms int32, topic_data [name, partition_data
    [index int32, records]]`` — the record bytes are parts of their own."""
    parts: list[Buffer] = []
    head = bytearray(_request_header(API_PRODUCE, PRODUCE_VERSION, correlation_id, client_id))
    head += b"\x00"  # transactional_id: null
    head += _I16.pack(request.acks) + _I32.pack(request.timeout_ms)
    grouped = _by_topic(request.partitions)
    head += _uvarint(len(grouped) + 1)
    pending = head
    for topic, partitions in grouped.items():
        pending += _compact_string(topic) + _uvarint(len(partitions) + 1)
        for p in partitions:
            records = p.records
            pending += _I32.pack(p.partition) + _uvarint(len(memoryview(records)) + 1)
            parts.append(bytes(pending))
            parts.append(records)
            pending = bytearray(_EMPTY_TAGS)  # the partition's tagged fields
        pending += _EMPTY_TAGS  # the topic's
    pending += _EMPTY_TAGS  # the request's
    parts.append(bytes(pending))
    size = sum(len(memoryview(part)) for part in parts)
    parts[0] = _SIZE.pack(size) + bytes(parts[0])  # bytes(bytes) is the same object
    return parts


def decode_produce_request(body: Buffer) -> ProduceRequest:
    """Parse a Produce v9 body (after the header); ``records`` are slices of ``body``."""
    reader = _Reader(body, "produce request")
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
    _check_unique(partitions)
    return ProduceRequest(tuple(partitions), acks, timeout_ms)


def encode_produce_response(correlation_id: int, results: Sequence[ProduceResult]) -> list[Buffer]:
    """``responses [name, partition_responses [index, error_code, base_offset,
    log_append_time_ms, log_start_offset, record_errors [], error_message]], throttle_time_ms``."""
    out = bytearray(_response_header(correlation_id, True))
    grouped = _by_topic(results)
    out += _uvarint(len(grouped) + 1)
    for topic, entries in grouped.items():
        out += _compact_string(topic) + _uvarint(len(entries) + 1)
        for r in entries:
            error = r.error
            out += _PRODUCE_PARTITION_RESULT.pack(
                r.partition,
                _kafka_code(error),
                r.base_offset,
                r.log_append_time,
                r.log_start_offset,
            )
            out += b"\x01"  # record_errors: empty
            out += _compact_string(error.message if error is not None else None)
            out += _error_tags(error)
        out += _EMPTY_TAGS
    out += _I32.pack(0) + _EMPTY_TAGS  # throttle_time_ms, tags
    return [_SIZE.pack(len(out)) + out]


def decode_produce_response(body: Buffer) -> tuple[ProduceResult, ...]:
    reader = _Reader(body, "produce response")
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
                    topic, index, base, append_time, start, _as_partition_error(code, message, tags)
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
    last_fetched_epoch, log_start_offset, partition_max_bytes]], forgotten_topics_data [],
    rack_id`` — a full fetch (no incremental session: session_epoch -1)."""
    out = bytearray(_request_header(API_FETCH, FETCH_VERSION, correlation_id, client_id))
    out += _FETCH_TOP.pack(
        request.replica_id, request.max_wait_ms, request.min_bytes, request.max_bytes, 0, 0, -1
    )
    grouped = _by_topic(request.partitions)
    out += _uvarint(len(grouped) + 1)
    for topic, partitions in grouped.items():
        out += _compact_string(topic) + _uvarint(len(partitions) + 1)
        for p in partitions:
            out += _FETCH_PARTITION.pack(
                p.partition, p.current_leader_epoch, p.offset, -1, -1, p.max_bytes
            )
            out += _EMPTY_TAGS
        out += _EMPTY_TAGS
    out += b"\x01"  # forgotten_topics_data: empty
    out += b"\x01"  # rack_id: ""
    out += _EMPTY_TAGS
    return [_SIZE.pack(len(out)) + out]


def decode_fetch_request(body: Buffer) -> FetchRequest:
    reader = _Reader(body, "fetch request")
    replica_id, max_wait_ms, min_bytes, max_bytes, _iso, _session, _epoch = reader.unpack(
        _FETCH_TOP, "request"
    )
    for name, value, low in (
        ("replica_id", replica_id, -1),
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
    for f in range(reader.array_length("forgotten_topics_data")):
        reader.string(f"forgotten_topics_data[{f}].topic")
        for _ in range(reader.array_length(f"forgotten_topics_data[{f}].partitions")):
            reader.int32(f"forgotten_topics_data[{f}].partitions")
        reader.tags(f"forgotten_topics_data[{f}]")
    reader.compact_string("rack_id")
    reader.tags("fetch request")
    reader.end()
    if not partitions:
        raise InvalidRequestError("partitions must be a non-empty list")
    _check_unique(partitions)
    return FetchRequest(tuple(partitions), max_wait_ms, min_bytes, max_bytes, replica_id)


def encode_fetch_response(
    correlation_id: int, partitions: Sequence[FetchedPartition]
) -> list[Buffer]:
    """``throttle_time_ms, error_code, session_id, responses [topic, partitions
    [partition_index, error_code, high_watermark, last_stable_offset, log_start_offset,
    aborted_transactions, preferred_read_replica, records]]`` — records uncopied."""
    parts: list[Buffer] = []
    pending = bytearray(_response_header(correlation_id, True))
    pending += _FETCH_RESULT_TOP.pack(0, 0, 0)
    grouped = _by_topic(partitions)
    pending += _uvarint(len(grouped) + 1)
    for topic, entries in grouped.items():
        pending += _compact_string(topic) + _uvarint(len(entries) + 1)
        for p in entries:
            error = p.error
            pending += _FETCH_PARTITION_RESULT.pack(
                p.partition,
                _kafka_code(error),
                p.high_watermark,
                p.last_stable_offset,
                p.log_start_offset,
            )
            pending += b"\x00"  # aborted_transactions: null
            pending += _I32.pack(-1)  # preferred_read_replica
            size = len(memoryview(p.records))
            pending += _uvarint(size + 1)
            if size:
                parts.append(bytes(pending))
                parts.append(p.records)
                pending = bytearray()
            pending += _error_tags(error)
        pending += _EMPTY_TAGS
    pending += _EMPTY_TAGS
    parts.append(bytes(pending))
    total = sum(len(memoryview(part)) for part in parts)
    parts[0] = _SIZE.pack(total) + bytes(parts[0])  # bytes(bytes) is the same object
    return parts


def decode_fetch_response(body: Buffer) -> tuple[FetchedPartition, ...]:
    reader = _Reader(body, "fetch response")
    _throttle, code, _session = reader.unpack(_FETCH_RESULT_TOP, "response")
    if code != 0:
        raise error_for_kafka_code(code, "the fetch was refused")
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
                    _as_partition_error(error_code, None, tags) if error_code else None,
                )
            )
        reader.tags(f"responses[{t}]")
    reader.tags("fetch response")
    reader.end()
    return tuple(result)


# --- SASL (the cluster secret on the internal plane) -----------------------------------------


def encode_sasl_handshake_request(
    mechanism: str, correlation_id: int, client_id: str = "yak"
) -> list[Buffer]:
    """SaslHandshake v1: ``mechanism string`` (non-flexible: header v1)."""
    data = mechanism.encode()
    head = _request_header(API_SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, correlation_id, client_id)
    return frame(head + _I16.pack(len(data)) + data, ())


def decode_sasl_handshake_request(body: Buffer) -> str:
    reader = _Reader(body, "sasl handshake")
    mechanism = reader.nullable_string16("mechanism")
    reader.end()
    return mechanism or ""


def encode_sasl_handshake_response(
    correlation_id: int, error_code: int, mechanisms: Sequence[str]
) -> list[Buffer]:
    """``error_code int16, mechanisms [string]`` (response header v0)."""
    out = bytearray(_response_header(correlation_id, False))
    out += _I16.pack(error_code) + _I32.pack(len(mechanisms))
    for mechanism in mechanisms:
        data = mechanism.encode()
        out += _I16.pack(len(data)) + data
    return [_SIZE.pack(len(out)) + out]


def decode_sasl_handshake_response(body: Buffer) -> tuple[int, list[str]]:
    reader = _Reader(body, "sasl handshake response")
    code = reader.int16("error_code")
    count = reader.int32("mechanisms")
    mechanisms = [reader.nullable_string16("mechanism") or "" for _ in range(max(count, 0))]
    reader.end()
    return code, mechanisms


def encode_sasl_authenticate_request(
    auth_bytes: bytes, correlation_id: int, client_id: str = "yak"
) -> list[Buffer]:
    """SaslAuthenticate v2: ``auth_bytes compact bytes``."""
    head = _request_header(
        API_SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION, correlation_id, client_id
    )
    return frame(head + _uvarint(len(auth_bytes) + 1) + auth_bytes + _EMPTY_TAGS, ())


def decode_sasl_authenticate_request(body: Buffer) -> bytes:
    reader = _Reader(body, "sasl authenticate")
    data = reader.compact_bytes("auth_bytes")
    reader.tags("sasl authenticate")
    reader.end()
    return bytes(data or b"")


def encode_sasl_authenticate_response(
    correlation_id: int, error_code: int, error_message: str | None
) -> list[Buffer]:
    """``error_code int16, error_message, auth_bytes, session_lifetime_ms int64``."""
    out = bytearray(_response_header(correlation_id, True))
    out += _I16.pack(error_code) + _compact_string(error_message) + b"\x01" + _I64.pack(0)
    out += _EMPTY_TAGS
    return [_SIZE.pack(len(out)) + out]


def decode_sasl_authenticate_response(body: Buffer) -> tuple[int, str | None]:
    reader = _Reader(body, "sasl authenticate response")
    code = reader.int16("error_code")
    message = reader.compact_string("error_message")
    reader.compact_bytes("auth_bytes")
    reader.int64("session_lifetime_ms")
    reader.tags("sasl authenticate response")
    reader.end()
    return code, message


# --- frame splitting --------------------------------------------------------------------------


class FrameTooLargeError(Exception):
    """A frame's size prefix exceeds the limit (the connection must be closed)."""


class FrameSplitter:
    """Cuts a byte stream into frames, for an ``asyncio.BufferedProtocol`` (pure: no I/O).

    The protocol asks ``buffer()`` for where to read into and reports ``filled(n)``; complete
    frames come out of ``filled`` as read-only buffers (the size prefix stripped). Small frames
    share one scratch buffer (and are copied out, once); a frame larger than ``direct_bytes``
    gets a buffer of its own that the socket fills directly — the record bytes of a produce
    request or a fetch response are never copied here. A frame larger than ``max_bytes``
    raises ``FrameTooLargeError`` (the connection cannot be kept: the stream has no resync point).
    """

    def __init__(
        self,
        *,
        max_bytes: int = MAX_FRAME_BYTES,
        direct_bytes: int = 64 * 1024,
        scratch_bytes: int = 256 * 1024,
    ) -> None:
        self._max = max_bytes
        self._direct = direct_bytes
        self._scratch = bytearray(scratch_bytes)
        self._start = 0  # first unread byte of scratch
        self._end = 0  # end of the bytes read into scratch
        self._big: bytearray | None = None
        self._big_filled = 0

    def buffer(self) -> memoryview:
        """Where the next read goes."""
        if self._big is not None:
            return memoryview(self._big)[self._big_filled :]
        if self._end == len(self._scratch):
            self._compact()
        return memoryview(self._scratch)[self._end :]

    def filled(self, count: int) -> list[Buffer]:
        """``count`` bytes were read into the last ``buffer()``; the frames now complete."""
        frames: list[Buffer] = []
        if self._big is not None:
            self._big_filled += count
            if self._big_filled < len(self._big):
                return frames
            frames.append(memoryview(self._big).toreadonly())
            self._big = None
            return frames
        self._end += count
        scratch = self._scratch
        while self._end - self._start >= 4:
            size = int(_SIZE.unpack_from(scratch, self._start)[0])
            if size < 0 or size > self._max:
                raise FrameTooLargeError(f"a frame of {size} bytes exceeds {self._max}")
            available = self._end - self._start - 4
            if available >= size:
                begin = self._start + 4
                frames.append(bytes(memoryview(scratch)[begin : begin + size]))
                self._start = begin + size
                continue
            if size > self._direct or size > len(scratch) - 4:
                big = bytearray(size)
                big[:available] = scratch[self._start + 4 : self._end]
                self._start = self._end = 0
                self._big, self._big_filled = big, available
            break
        if self._start == self._end:
            self._start = self._end = 0
        return frames

    def _compact(self) -> None:
        remaining = self._end - self._start
        self._scratch[:remaining] = self._scratch[self._start : self._end]
        self._start, self._end = 0, remaining
