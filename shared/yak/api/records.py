"""Bodies of the native record API (``/api/v1``) and how keys, values and headers are encoded.

A key or value travels in one of three encodings, chosen per request:

* ``string`` — a JSON string, stored as its UTF-8 bytes (the default for keys);
* ``json`` — any JSON value, stored as its compact JSON text (the default for values); read back,
  bytes that are not JSON come out as one string of their UTF-8 text;
* ``base64`` — a base64 string (standard alphabet), stored as the bytes it encodes.

``null`` is a null key or value (a tombstone) in every encoding. Header values are ``string`` or
``base64`` (``header_encoding``); header keys are always strings. Timestamps are milliseconds
since the Unix epoch.
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict

from yak.api.json_int import integral
from yak.errors import InvalidRequestError

__all__ = [
    "API_PREFIX",
    "FETCH_MEDIA_TYPE",
    "INT32_MAX",
    "INT64_MAX",
    "RECORD_BATCH_MEDIA_TYPE",
    "ConsumedRecord",
    "Encoding",
    "HeaderEncoding",
    "PartitionRecords",
    "ProduceBatchRequest",
    "ProduceBatchResponse",
    "ProduceRecord",
    "ProduceRecordsRequest",
    "ProduceRecordsResponse",
    "ProducerSession",
    "RecordError",
    "RecordHeader",
    "RecordResult",
    "decode_data",
    "encode_data",
    "json_bytes",
    "utf8",
]

#: Path prefix of the native API.
API_PREFIX = "/api/v1"
#: Bounds of Kafka's int64 offsets and timestamps and int32 partition numbers on the wire.
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
#: Content-Type of the binary form of ``POST …/partitions/{p}/batches``: the body is exactly one
#: Kafka RecordBatch (format v2, magic 2) as ``yak.record.encode_batch`` writes it.
RECORD_BATCH_MEDIA_TYPE = "application/vnd.yak.recordbatch.v2"
#: The ``Accept`` type of a member's binary poll (``GET /api/v1/groups/{g}/members/{m}/records``):
#: the fetched record batches as the broker stored them, framed per partition
#: (``yak.api.fetch_answer``).
FETCH_MEDIA_TYPE = "application/vnd.yak.fetch.v1"


class Encoding(StrEnum):
    STRING = "string"
    JSON = "json"
    BASE64 = "base64"


class HeaderEncoding(StrEnum):
    STRING = "string"
    BASE64 = "base64"


def encode_data(value: Any, encoding: Encoding, where: str) -> bytes | None:
    """The bytes ``value`` stands for; ``InvalidRequestError`` naming ``where`` if it cannot."""
    if value is None:
        return None
    if encoding is Encoding.JSON:
        return json_bytes(value, where)
    if not isinstance(value, str):
        raise InvalidRequestError(
            f"{where}: {encoding.value} data must be a JSON string, not {type(value).__name__}",
            kind="invalid_data",
        )
    if encoding is Encoding.STRING:
        return utf8(value, where)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequestError(f"{where}: not valid base64", kind="invalid_data") from None


def json_bytes(value: Any, where: str) -> bytes:
    """``value`` as compact JSON; ``InvalidRequestError`` for what JSON cannot carry on to
    other readers (integers past 64 bits, lone surrogates in strings)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        raise InvalidRequestError(
            f"{where}: cannot be stored as JSON: {exc}", kind="invalid_data"
        ) from None


def utf8(text: str, where: str) -> bytes:
    """``text`` as UTF-8; ``InvalidRequestError`` for lone surrogates, which UTF-8 cannot hold."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise InvalidRequestError(
            f"{where}: the text holds a lone surrogate and has no UTF-8 form", kind="invalid_data"
        ) from None


def decode_data(data: bytes | None, encoding: Encoding) -> Any:
    """``data`` in ``encoding`` (the inverse of ``encode_data``; see the module docstring)."""
    if data is None:
        return None
    if encoding is Encoding.BASE64:
        return base64.b64encode(data).decode("ascii")
    if encoding is Encoding.JSON:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return data.decode("utf-8", errors="replace")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RecordHeader(_Body):
    key: str
    value: str | None = None


class ProduceRecord(_Body):
    key: Any = None
    value: Any = None
    headers: list[RecordHeader] = Field(default_factory=list)
    #: Create time in ms (default: when the proxy received it).
    timestamp: int | None = Field(default=None, ge=0, le=INT64_MAX)
    #: Explicit partition (default: murmur2 of the key, else sticky).
    partition: int | None = Field(default=None, ge=0, le=INT32_MAX)
    #: Delay delivery to share groups by this many ms from when the proxy received it
    #: (the ``yak-deliver-at`` header; the topic needs ``delayed.delivery.enable=true``).
    deliver_after_ms: int | None = Field(default=None, le=INT64_MAX)
    #: Deliver to share groups at this time: epoch ms, or RFC 3339 with a time zone.
    deliver_at: int | datetime | None = None


class ProduceRecordsRequest(_Body):
    records: list[ProduceRecord] = Field(min_length=1)
    key_encoding: Encoding = Encoding.STRING
    value_encoding: Encoding = Encoding.JSON
    header_encoding: HeaderEncoding = HeaderEncoding.STRING
    #: The default delay of the records that give none (``ProduceRecord.deliver_after_ms``).
    deliver_after_ms: int | None = Field(default=None, le=INT64_MAX)
    #: The default due time of the records that give none (``ProduceRecord.deliver_at``).
    deliver_at: int | datetime | None = None


class RecordError(BaseModel):
    code: str
    message: str
    retriable: bool


class RecordResult(BaseModel):
    """Where one record landed (``offset`` -1 with acks=0), or why it did not."""

    partition: int | None = None
    offset: int | None = None
    timestamp: int | None = None
    error: RecordError | None = None


class ProduceRecordsResponse(BaseModel):
    results: list[RecordResult]


class ConsumedRecord(BaseModel):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Any = None
    value: Any = None
    headers: list[RecordHeader] = Field(default_factory=list)


class PartitionRecords(BaseModel):
    """A stateless read of one partition: records from ``offset`` and where to go on."""

    topic: str
    partition: int
    records: list[ConsumedRecord]
    #: The offset to read next (past the last record returned; the asked offset if none).
    next_offset: int
    high_watermark: int
    log_start_offset: int


class ProducerSession(BaseModel):
    """An idempotent producer identity handed out by ``POST /api/v1/producers``."""

    producer_id: int
    producer_epoch: int


class ProduceBatchRequest(_Body):
    """``POST /api/v1/topics/{t}/partitions/{p}/batches``: one idempotent batch.

    Records get sequence numbers ``base_sequence``, ``base_sequence + 1`` ... for this producer
    and partition; the next batch must start where this one ended. Sending the same batch again
    (same producer, epoch and ``base_sequence``) — e.g. after a timeout, through any proxy —
    returns the offsets it got the first time instead of writing it twice.
    """

    # strict (json_int): JSON's true/false are no producer id, epoch or sequence
    producer_id: Annotated[int, Strict(), Field(ge=0, le=INT64_MAX), BeforeValidator(integral)]
    producer_epoch: Annotated[int, Strict(), Field(ge=0, le=32767), BeforeValidator(integral)]
    base_sequence: Annotated[int, Strict(), Field(ge=0, le=2**31 - 1), BeforeValidator(integral)]
    records: list[ProduceRecord] = Field(min_length=1)
    #: Codec of the stored batch.
    compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "none"
    key_encoding: Encoding = Encoding.STRING
    value_encoding: Encoding = Encoding.JSON
    header_encoding: HeaderEncoding = HeaderEncoding.STRING


class ProduceBatchResponse(BaseModel):
    partition: int
    base_offset: int
    #: One offset per record, in order.
    offsets: list[int]
