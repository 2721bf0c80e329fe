"""One Confluent v3 produce record in, one delivery report out: pure functions over values.

A record (``ProduceRequest``) is a JSON object of ``partition_id`` (int or null), ``headers``
(``[{"name": str, "value": base64 | null}]``), ``key`` and ``value`` (each null or ``{"type":
BINARY|JSON|STRING, "data": ...}``: base64 text, any JSON, or text) and ``timestamp`` (RFC 3339 /
ISO 8601, null: now). AVRO, JSONSCHEMA and PROTOBUF, and a key or value without ``type``, are
encoded with the schema ``schema_data`` finds, handed in as ``serdes`` (the route resolves them
first); without one they are ``UnsupportedFormatError`` (422). Other fields are refused (422),
so a misspelt ``partition`` never sends a record somewhere unintended.

The report (``ProduceResponse``) is ``{"error_code": 200, "cluster_id", "topic_name",
"partition_id", "offset", "timestamp", "key": {"type", "size"} | null, "value": ...}`` or, for a
record that failed, ``{"error_code": <v3 code>, "message"}``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson

from yak.api.records import INT32_MAX, json_bytes, utf8
from yak.errors import InvalidRequestError, UnknownTopicOrPartitionError, YakError
from yak.record import RecordInput
from yak_rest_proxy.api.v3.errors import UnsupportedFormatError, v3_error_body
from yak_rest_proxy.produce.accumulator import ProducedRecord
from yak_rest_proxy.produce.publish import OutgoingRecord
from yak_rest_proxy.schemas import Serde

__all__ = [
    "ParsedRecord",
    "build_record",
    "delivery_report",
    "iso_timestamp",
    "load_record",
    "parse_record",
]

_FIELDS = frozenset({"partition_id", "headers", "key", "value", "timestamp"})
_DATA_FIELDS = frozenset(
    {"type", "data", "subject", "subject_name_strategy", "schema_id", "schema_version", "schema"}
)
_SCHEMA_TYPES = frozenset({"AVRO", "JSONSCHEMA", "PROTOBUF"})


class ParsedRecord(NamedTuple):
    """A record ready for the producer, and what its report says of its key and value:
    ``(type, size)`` each, None when the request gave none."""

    outgoing: OutgoingRecord
    key: tuple[str, int] | None
    value: tuple[str, int] | None


def _bad(message: str, kind: str = "invalid_body") -> InvalidRequestError:
    return InvalidRequestError(message, kind=kind)


def _base64(text: object, where: str) -> bytes:
    if not isinstance(text, str):
        raise _bad(f"{where}: must be a base64 string, not {type(text).__name__}", "invalid_data")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise _bad(f"Bad Request: {where} is not a base64 string", "invalid_data") from None


def check_data(given: object, where: str) -> dict[str, Any] | None:
    """A key or value's object, its fields checked."""
    if given is None:
        return None
    if not isinstance(given, dict):
        raise _bad(f"{where}: must be an object with type and data")
    unknown = given.keys() - _DATA_FIELDS
    if unknown:
        raise _bad(f"{where}: unknown field {sorted(unknown)[0]!r}")
    return given


def _schema_data(
    given: dict[str, Any], where: str, serde: Serde | None
) -> tuple[bytes | None, tuple[str, int] | None]:
    kind = given.get("type")
    if serde is None:
        raise UnsupportedFormatError(
            f"{where}: {'a value without type' if kind is None else kind} needs a schema "
            "registry, and this proxy has none configured (YAK_SCHEMA_REGISTRY_URL): give "
            "type BINARY, JSON or STRING"
        )
    data = given.get("data")
    raw = None if data is None else serde.encode(data, f"{where}.data")
    reported = "JSONSCHEMA" if serde.schema_type.value == "JSON" else serde.schema_type.value
    return raw, (reported, 0 if raw is None else len(raw))


def _data(
    given: dict[str, Any] | None, where: str, serde: Serde | None
) -> tuple[bytes | None, tuple[str, int] | None]:
    """The bytes of a key or value, and its report entry."""
    if given is None:
        return None, None
    kind = given.get("type")
    if kind is None or (isinstance(kind, str) and kind in _SCHEMA_TYPES):
        return _schema_data(given, where, serde)
    data = given.get("data")
    if kind == "BINARY":
        raw = None if data is None else _base64(data, f"{where}.data")
    elif kind == "STRING":
        if data is not None and not isinstance(data, str):
            raise _bad(f"{where}.data: STRING data must be a string", "invalid_data")
        raw = None if data is None else utf8(data, f"{where}.data")
    elif kind == "JSON":
        raw = None if data is None else json_bytes(data, f"{where}.data")
    else:
        raise _bad(f"{where}.type: must be BINARY, JSON or STRING, not {kind!r}")
    return raw, (kind, 0 if raw is None else len(raw))


def _headers(given: object) -> tuple[tuple[str, bytes | None], ...]:
    if given is None:
        return ()
    if not isinstance(given, list):
        raise _bad("headers: must be a list of {name, value}")
    headers = []
    for index, header in enumerate(given):
        if not isinstance(header, dict) or not isinstance(header.get("name"), str):
            raise _bad(f"headers[{index}]: must be an object with a string name")
        value = header.get("value")
        raw = None if value is None else _base64(value, f"headers[{index}].value")
        headers.append((header["name"], raw))
    return tuple(headers)


def _timestamp(given: object, now_ms: int) -> int:
    if given is None:
        return now_ms
    if not isinstance(given, str):
        raise _bad("timestamp: must be an ISO 8601 date-time string")
    try:
        moment = datetime.fromisoformat(given)
    except ValueError:
        where = f"timestamp: {given[:40]!r}"
        raise _bad(f"{where} is not an ISO 8601 date-time", "invalid_data") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    stamp = int(moment.timestamp() * 1000)
    if stamp < 0:
        raise _bad("timestamp: must not be before 1970", "invalid_data")
    return stamp


def _partition(given: object) -> int | None:
    if given is None:
        return None
    if type(given) is float and given.is_integer():
        given = int(given)  # 5.0 is the integer 5, as JSON Schema's integer takes it
    if type(given) is not int or given > INT32_MAX:
        raise _bad(f"partition_id: must be an integer in 0..{INT32_MAX} or null")
    if given < 0:
        raise UnknownTopicOrPartitionError("Partition not found.", partition=given)
    return given


def load_record(raw: bytes) -> dict[str, Any]:
    """One JSON object of a produce body, its fields checked (not yet their values)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _bad(f"the record is not valid JSON: {exc}", "malformed_json") from None
    if not isinstance(body, dict):
        raise _bad("a record must be a JSON object")
    unknown = body.keys() - _FIELDS
    if unknown:
        raise _bad(f"unknown field {sorted(unknown)[0]!r}")
    for field in ("key", "value"):
        body[field] = check_data(body.get(field), field)
    return body


def parse_record(raw: bytes, now_ms: int) -> ParsedRecord:
    """The record one JSON object of a produce body describes; typed errors otherwise."""
    return build_record(load_record(raw), now_ms)


def build_record(
    body: dict[str, Any], now_ms: int, serdes: Mapping[str, Serde] | None = None
) -> ParsedRecord:
    """The record of a loaded body (``load_record``); ``serdes`` encode its schema-typed key
    (``"key"``) and value (``"value"``)."""
    serdes = serdes or {}
    key, key_report = _data(body.get("key"), "key", serdes.get("key"))
    value, value_report = _data(body.get("value"), "value", serdes.get("value"))
    record = RecordInput(
        key=key,
        value=value,
        headers=_headers(body.get("headers")),
        timestamp=_timestamp(body.get("timestamp"), now_ms),
    )
    outgoing = OutgoingRecord(record, _partition(body.get("partition_id")))
    return ParsedRecord(outgoing, key_report, value_report)


def iso_timestamp(ms: int) -> str | None:
    """Milliseconds since the epoch as RFC 3339 in UTC (``2021-02-05T19:14:42.123Z``)."""
    if ms < 0:
        return None
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _data_report(entry: tuple[str, int] | None) -> dict[str, Any] | None:
    return None if entry is None else {"type": entry[0], "size": entry[1]}


def delivery_report(
    cluster_id: str, topic: str, parsed: ParsedRecord, result: ProducedRecord | YakError
) -> dict[str, Any]:
    """The ``ProduceResponse`` of one record."""
    if isinstance(result, YakError):
        return v3_error_body(result)
    return {
        "error_code": 200,
        "cluster_id": cluster_id,
        "topic_name": topic,
        "partition_id": result.partition,
        "offset": result.offset,
        "timestamp": iso_timestamp(result.timestamp),
        "key": _data_report(parsed.key),
        "value": _data_report(parsed.value),
    }
