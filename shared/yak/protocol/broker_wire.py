"""The broker's binary data plane on the wire: produce requests, fetch requests and responses.

Large record bytes are never JSON-escaped nor copied more than needed: a produce request and a
fetch response are a *frame*, a small JSON header followed by the raw RecordBatch v2 bytes of
each partition back to back. Byte layout of a frame (content type ``FRAME_CONTENT_TYPE``)::

    offset  size  field
    0       4     magic          b"YKF1"
    4       4     header_length  uint32, big-endian: N, 2 <= N <= MAX_HEADER_BYTES
    8       N     header         a UTF-8 JSON object (see below)
    8+N     ...   payload        the partitions' record bytes, in header order, back to back

Every header entry carries ``"size"``; entry i's bytes start where entry i-1's end, and the sizes
must add up to exactly the payload length. Decoding hands out ``memoryview`` slices of the body
(no copy). Produce request header::

    {"acks": 1, "timeout_ms": 30000,
     "partitions": [{"topic": "orders", "partition": 0, "size": 65536}, ...]}

Fetch response header (per partition; ``error`` is null or ``{"code", "message", "details"}``)::

    {"partitions": [{"topic": "orders", "partition": 0, "high_watermark": 10,
                     "last_stable_offset": 10, "log_start_offset": 0, "error": null,
                     "size": 4096}, ...]}

The small messages are plain JSON (``application/json``). Fetch request::

    {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
     "partitions": [{"topic": "orders", "partition": 0, "offset": 0, "max_bytes": 1048576,
                     "current_leader_epoch": -1}]}

Produce response (``base_offset``/``log_start_offset`` are -1 on error; ``log_append_time`` is -1
for CreateTime topics)::

    {"partitions": [{"topic": "orders", "partition": 0, "base_offset": 42,
                     "log_append_time": -1, "log_start_offset": 0, "error": null}]}

Anything malformed raises ``InvalidRequestError`` with a message naming the field; a decoder
never returns a partial result. Pure functions; safe from any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import orjson

from yak.errors import InvalidRequestError, YakError, error_for_code

__all__ = [
    "ACKS_ALL",
    "CONSUMER_REPLICA_ID",
    "FRAME_CONTENT_TYPE",
    "FRAME_MAGIC",
    "JSON_CONTENT_TYPE",
    "MAX_HEADER_BYTES",
    "Buffer",
    "FetchPartition",
    "FetchRequest",
    "FetchResponse",
    "FetchedPartition",
    "PartitionError",
    "ProducePartition",
    "ProduceRequest",
    "ProduceResult",
    "check_unique",
    "decode_fetch_request",
    "decode_fetch_response",
    "decode_produce_request",
    "decode_produce_response",
    "encode_fetch_request",
    "encode_fetch_response",
    "encode_produce_request",
    "encode_produce_response",
    "fetch_response_parts",
]

Buffer = bytes | bytearray | memoryview

FRAME_MAGIC = b"YKF1"
FRAME_CONTENT_TYPE = "application/vnd.yak.frame"
JSON_CONTENT_TYPE = "application/json"
MAX_HEADER_BYTES = 1024 * 1024
ACKS_ALL = -1
#: ``replica_id`` of a consumer's fetch (followers send their broker id).
CONSUMER_REPLICA_ID = -1
_PREFIX = struct.Struct(">4sI")
_EMPTY = memoryview(b"")


class PartitionError(NamedTuple):
    """A typed error of one partition, as it travels: its code, message and details."""

    code: str
    message: str
    details: Mapping[str, Any] = {}

    @classmethod
    def of(cls, error: YakError) -> PartitionError:
        return cls(error.code, error.message, dict(error.details))

    def exception(self) -> YakError:
        """The typed error (``yak.errors``) this stands for."""
        return error_for_code(self.code, self.message, **self.details)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            body["details"] = dict(self.details)
        return body


class ProducePartition(NamedTuple):
    """The record batches (RecordBatch v2 bytes) to append to one partition."""

    topic: str
    partition: int
    records: Buffer


class ProduceRequest(NamedTuple):
    """``acks``: 0 (no answer waited for), 1 (leader) or -1 (all in-sync replicas)."""

    partitions: tuple[ProducePartition, ...]
    acks: int = 1
    timeout_ms: int = 30_000


class ProduceResult(NamedTuple):
    """Where one partition's batches went, or why they did not."""

    topic: str
    partition: int
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error: PartitionError | None = None


class FetchPartition(NamedTuple):
    """Read one partition from ``offset``, at most ``max_bytes`` (but at least one batch).

    ``current_leader_epoch``: the leader epoch the fetcher believes current (followers always
    send it); the leader refuses an older one (``FENCED_LEADER_EPOCH``) and a newer one
    (``UNKNOWN_LEADER_EPOCH``). -1 skips the check.
    """

    topic: str
    partition: int
    offset: int
    max_bytes: int = 1024 * 1024
    current_leader_epoch: int = -1


class FetchRequest(NamedTuple):
    """A long poll over several partitions (Kafka's Fetch): see the module doc.

    The session fields are Kafka's (Fetch v7+, KIP-227), carried by the internal listener's
    Fetch only (the JSON form is always sessionless): ``session_epoch`` -1 with
    ``session_id`` 0 is a sessionless fetch, 0 a full fetch that creates a session, and a
    larger one an incremental fetch of ``session_id`` that names only changed partitions and
    drops the ``forgotten`` ones (``yak_broker.replication.fetch_session_cache``).
    """

    partitions: tuple[FetchPartition, ...]
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 50 * 1024 * 1024
    replica_id: int = CONSUMER_REPLICA_ID
    session_id: int = 0
    session_epoch: int = -1
    forgotten: tuple[tuple[str, int], ...] = ()
    #: A follower's data folder id (``BrokerRegistration.log_dir_id``; "" from a consumer or
    #: an older broker): the leader counts a follower's progress per folder and adds it to the
    #: ISR only under the id its registration shows (KIP-903's broker epoch in the fetch).
    replica_log_dir_id: str = ""


class FetchedPartition(NamedTuple):
    """One partition of a fetch response: whole batches and the partition's offsets."""

    topic: str
    partition: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Buffer = _EMPTY
    error: PartitionError | None = None


class FetchResponse(NamedTuple):
    """A fetch's answer with its session: ``session_id`` (0: none) and the request-level
    ``error_code`` (Kafka's number: 70 ``FETCH_SESSION_ID_NOT_FOUND``, 71
    ``INVALID_FETCH_SESSION_EPOCH``; then no partition is answered)."""

    partitions: tuple[FetchedPartition, ...]
    session_id: int = 0
    error_code: int = 0


# --- frames ---------------------------------------------------------------------------------


def _frame_prefix(header: bytes) -> bytes:
    if len(header) > MAX_HEADER_BYTES:
        raise InvalidRequestError(
            f"frame header of {len(header)} bytes exceeds {MAX_HEADER_BYTES}",
            size=len(header),
        )
    return _PREFIX.pack(FRAME_MAGIC, len(header)) + header


def _decode_frame(body: Buffer) -> tuple[dict[str, Any], memoryview]:
    view = memoryview(body)
    if len(view) < _PREFIX.size:
        raise InvalidRequestError(f"frame of {len(view)} bytes is shorter than its 8-byte prefix")
    magic, length = _PREFIX.unpack_from(view)
    if magic != FRAME_MAGIC:
        raise InvalidRequestError(f"bad frame magic {bytes(magic)!r}, expected {FRAME_MAGIC!r}")
    if length > MAX_HEADER_BYTES or _PREFIX.size + length > len(view):
        raise InvalidRequestError(
            f"frame header length {length} does not fit the {len(view)}-byte frame",
            header_length=length,
        )
    header = _load_json(view[_PREFIX.size : _PREFIX.size + length], "frame header")
    return header, view[_PREFIX.size + length :]


def _split_payload(entries: Sequence[Mapping[str, Any]], payload: memoryview) -> list[memoryview]:
    slices: list[memoryview] = []
    position = 0
    for index, entry in enumerate(entries):
        size = _int(entry, "size", f"partitions[{index}]", low=0)
        if position + size > len(payload):
            raise InvalidRequestError(
                f"partitions[{index}].size {size} runs past the {len(payload)}-byte payload"
            )
        slices.append(payload[position : position + size])
        position += size
    if position != len(payload):
        raise InvalidRequestError(
            f"sizes add up to {position} bytes but the payload has {len(payload)}"
        )
    return slices


# --- produce --------------------------------------------------------------------------------


def encode_produce_request(request: ProduceRequest) -> bytes:
    """The frame of a produce request (one copy of the record bytes, on the client side)."""
    header = {
        "acks": request.acks,
        "timeout_ms": request.timeout_ms,
        "partitions": [
            {"topic": p.topic, "partition": p.partition, "size": len(memoryview(p.records))}
            for p in request.partitions
        ],
    }
    prefix = _frame_prefix(orjson.dumps(header))
    return b"".join([prefix, *(p.records for p in request.partitions)])


def decode_produce_request(body: Buffer) -> ProduceRequest:
    """Parse a produce frame; each partition's ``records`` is a slice of ``body``."""
    header, payload = _decode_frame(body)
    acks = _int(header, "acks", "request")
    if acks not in (0, 1, ACKS_ALL):
        raise InvalidRequestError(f"acks must be 0, 1 or -1 (all), got {acks}", acks=acks)
    timeout_ms = _int(header, "timeout_ms", "request", low=0, default=30_000)
    entries = _entries(header, "partitions")
    slices = _split_payload(entries, payload)
    partitions = []
    for index, (entry, records) in enumerate(zip(entries, slices, strict=True)):
        topic, partition = _topic_partition(entry, f"partitions[{index}]")
        partitions.append(ProducePartition(topic, partition, records))
    check_unique(partitions)
    return ProduceRequest(tuple(partitions), acks, timeout_ms)


def encode_produce_response(results: Iterable[ProduceResult]) -> bytes:
    return orjson.dumps({"partitions": [_result_json(r) for r in results]})


def _result_json(result: ProduceResult) -> dict[str, Any]:
    return {
        "topic": result.topic,
        "partition": result.partition,
        "base_offset": result.base_offset,
        "log_append_time": result.log_append_time,
        "log_start_offset": result.log_start_offset,
        "error": result.error.to_json() if result.error else None,
    }


def decode_produce_response(body: Buffer) -> tuple[ProduceResult, ...]:
    document = _load_json(body, "produce response")
    results = []
    for index, entry in enumerate(_entries(document, "partitions")):
        where = f"partitions[{index}]"
        topic, partition = _topic_partition(entry, where)
        results.append(
            ProduceResult(
                topic,
                partition,
                _int(entry, "base_offset", where),
                _int(entry, "log_append_time", where),
                _int(entry, "log_start_offset", where),
                _error(entry, where),
            )
        )
    return tuple(results)


# --- fetch ----------------------------------------------------------------------------------


def encode_fetch_request(request: FetchRequest) -> bytes:
    return orjson.dumps(
        {
            "replica_id": request.replica_id,
            "replica_log_dir_id": request.replica_log_dir_id,
            "max_wait_ms": request.max_wait_ms,
            "min_bytes": request.min_bytes,
            "max_bytes": request.max_bytes,
            "partitions": [p._asdict() for p in request.partitions],
        }
    )


def decode_fetch_request(body: Buffer) -> FetchRequest:
    document = _load_json(body, "fetch request")
    partitions = []
    for index, entry in enumerate(_entries(document, "partitions")):
        where = f"partitions[{index}]"
        topic, partition = _topic_partition(entry, where)
        offset = _int(entry, "offset", where, low=0)
        max_bytes = _int(entry, "max_bytes", where, low=1, default=1024 * 1024)
        epoch = _int(entry, "current_leader_epoch", where, low=-1, default=-1)
        partitions.append(FetchPartition(topic, partition, offset, max_bytes, epoch))
    check_unique(partitions)
    return FetchRequest(
        tuple(partitions),
        max_wait_ms=_int(document, "max_wait_ms", "request", low=0, default=500),
        min_bytes=_int(document, "min_bytes", "request", low=0, default=1),
        max_bytes=_int(document, "max_bytes", "request", low=1, default=50 * 1024 * 1024),
        replica_id=_int(document, "replica_id", "request", low=-1, default=CONSUMER_REPLICA_ID),
        replica_log_dir_id=_log_dir_id(document),
    )


def _log_dir_id(document: Mapping[str, Any]) -> str:
    value = document.get("replica_log_dir_id", "")
    if not isinstance(value, str) or len(value) > 64:
        raise InvalidRequestError("request.replica_log_dir_id must be a string of <= 64 chars")
    return value


def fetch_response_parts(partitions: Sequence[FetchedPartition]) -> list[Buffer]:
    """The fetch response frame as parts to write in order (the record bytes uncopied)."""
    header = {
        "partitions": [
            {
                "topic": p.topic,
                "partition": p.partition,
                "high_watermark": p.high_watermark,
                "last_stable_offset": p.last_stable_offset,
                "log_start_offset": p.log_start_offset,
                "error": p.error.to_json() if p.error else None,
                "size": len(memoryview(p.records)),
            }
            for p in partitions
        ]
    }
    parts: list[Buffer] = [_frame_prefix(orjson.dumps(header))]
    parts.extend(p.records for p in partitions if len(memoryview(p.records)))
    return parts


def encode_fetch_response(partitions: Sequence[FetchedPartition]) -> bytes:
    return b"".join(fetch_response_parts(partitions))


def decode_fetch_response(body: Buffer) -> tuple[FetchedPartition, ...]:
    """Parse a fetch frame; each partition's ``records`` is a slice of ``body``."""
    header, payload = _decode_frame(body)
    entries = _entries(header, "partitions", allow_empty=True)
    slices = _split_payload(entries, payload)
    result = []
    for index, (entry, records) in enumerate(zip(entries, slices, strict=True)):
        where = f"partitions[{index}]"
        topic, partition = _topic_partition(entry, where)
        result.append(
            FetchedPartition(
                topic,
                partition,
                _int(entry, "high_watermark", where),
                _int(entry, "last_stable_offset", where),
                _int(entry, "log_start_offset", where),
                records,
                _error(entry, where),
            )
        )
    return tuple(result)


# --- field helpers --------------------------------------------------------------------------


def _load_json(data: Buffer, what: str) -> dict[str, Any]:
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequestError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise InvalidRequestError(f"{what} must be a JSON object")
    return document


def _entries(
    document: Mapping[str, Any], name: str, *, allow_empty: bool = False
) -> list[dict[str, Any]]:
    entries = document.get(name)
    if not isinstance(entries, list) or not (entries or allow_empty):
        raise InvalidRequestError(f"{name} must be a non-empty list")
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise InvalidRequestError(f"{name}[{index}] must be an object")
    return entries


def _int(
    entry: Mapping[str, Any],
    name: str,
    where: str,
    *,
    low: int | None = None,
    default: int | None = None,
) -> int:
    value = entry.get(name, default)
    if type(value) is not int:  # bool is an int subclass: refuse it too
        raise InvalidRequestError(f"{where}.{name} must be an integer, got {value!r}")
    if low is not None and value < low:
        raise InvalidRequestError(f"{where}.{name} must be >= {low}, got {value}")
    return value


def _topic_partition(entry: Mapping[str, Any], where: str) -> tuple[str, int]:
    topic = entry.get("topic")
    if not isinstance(topic, str) or not topic:
        raise InvalidRequestError(f"{where}.topic must be a non-empty string, got {topic!r}")
    return topic, _int(entry, "partition", where, low=0)


def _error(entry: Mapping[str, Any], where: str) -> PartitionError | None:
    error = entry.get("error")
    if error is None:
        return None
    if not isinstance(error, dict) or not isinstance(error.get("code"), str):
        raise InvalidRequestError(f"{where}.error must be null or an object with a code")
    details = error.get("details") or {}
    if not isinstance(details, dict):
        raise InvalidRequestError(f"{where}.error.details must be an object")
    return PartitionError(error["code"], str(error.get("message", "")), details)


def check_unique(partitions: Sequence[ProducePartition | FetchPartition]) -> None:
    """Refuse a request that names one partition twice (``INVALID_REQUEST``)."""
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
