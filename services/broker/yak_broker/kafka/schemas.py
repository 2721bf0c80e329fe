"""Kafka's message schemas from ``kio``: parse a request body, write a response body, by version.

``kio`` holds Python types generated from Kafka's own JSON schemas, one module per API and
version, with a (native) parser and a writer for each. This module is the listener's only door
to it, so handlers never name a version's module:

- ``read_request(api_key, version, body)`` parses a request body (after the header) into kio's
  frozen dataclass of that version; anything malformed is an ``InvalidRequestError`` (the
  listener then closes the connection, as Kafka does). Bytes after the version's fields are
  not read, as Kafka does not: librdkafka 2.16's all-topics Metadata v12 carries three;
- ``write_response(api_key, version, correlation_id, values)`` builds the response of that
  version from plain values — ints, strings, ``uuid.UUID``, lists of dicts for nested
  structures — and writes the whole frame. Handlers give the newest shape; a key the version
  does not have is dropped (Metadata v1 has no topic ids), a field they leave out keeps the
  schema's default, and a required field left out is a programming error (``TypeError``).
  Conversions: an ``error_code`` field takes the number, ``timedelta`` and ``datetime``
  fields milliseconds (a datetime -1: none).

Headers: the response header is v1 (tagged fields) for a flexible response, v0 otherwise —
except ApiVersions, whose response header is always v0 so that a client of any version can read
it. ``request_is_flexible`` says which request header (v2 or v1) a version uses.

Pure (no asyncio, no I/O); the plans derived from a schema are cached per class. Safe from any
thread.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import logging
import types
from collections.abc import Callable, Mapping
from typing import Any, Union, get_args, get_origin

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from yak.errors import InvalidRequestError
from yak.protocol.broker_wire import Buffer
from yak.protocol.kafka_types import EMPTY_TAGS, I32, SIZE

__all__ = [
    "API_VERSIONS_KEY",
    "read_request",
    "request_is_flexible",
    "response_frame",
    "write_response",
]

_log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18

_Convert = Callable[[Any], Any]


def request_is_flexible(api_key: int, version: int) -> bool:
    """Whether this request version is flexible (request header v2); KioIndexError if kio
    has no such version."""
    return bool(load_request_schema(api_key, version).__flexible__)


def read_request(api_key: int, version: int, body: Buffer) -> Any:
    """The request body as kio's dataclass of ``version`` (see the module doc)."""
    try:
        schema = load_request_schema(api_key, version)
        value, size = entity_reader(schema)(bytes(body), 0)
    except KioIndexError as exc:
        raise InvalidRequestError(f"no schema for api key {api_key} v{version}") from exc
    except Exception as exc:  # kio's native parser raises whatever the bytes provoke
        raise InvalidRequestError(
            f"a malformed api key {api_key} v{version} request: {exc!r}"
        ) from None
    if size != len(memoryview(body)):  # as Kafka: what follows the fields is not read
        _log.debug("api key %d v%d: %d bytes past the fields", api_key, version, len(body) - size)
    return value


def write_response(
    api_key: int, version: int, correlation_id: int, values: Mapping[str, Any]
) -> list[Buffer]:
    """The whole response frame of ``version`` built from ``values`` (see the module doc)."""
    schema = load_response_schema(api_key, version)
    entity = _build(schema, values)
    out = io.BytesIO()
    entity_writer(schema)(out, entity)
    flexible = bool(schema.__flexible__) and api_key != API_VERSIONS_KEY
    return response_frame(correlation_id, flexible, out.getvalue())


def response_frame(correlation_id: int, flexible: bool, body: bytes) -> list[Buffer]:
    """A response frame: size, header v1 (flexible) or v0, body."""
    head = I32.pack(correlation_id) + (EMPTY_TAGS if flexible else b"")
    return [SIZE.pack(len(head) + len(body)) + head + body]


def _build(schema: type, values: Mapping[str, Any]) -> Any:
    kwargs: dict[str, Any] = {}
    for name, convert, required in _plan(schema):
        if name in values:
            kwargs[name] = convert(values[name])
        elif required:
            raise TypeError(f"{schema.__module__}.{schema.__qualname__} needs {name!r}")
    return schema(**kwargs)


@functools.cache
def _plan(schema: type) -> tuple[tuple[str, _Convert, bool], ...]:
    """Per field of a kio dataclass: its name, how to convert a plain value, and whether it
    has no default."""
    plan = []
    for field in dataclasses.fields(schema):
        required = (
            field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        )
        plan.append((field.name, _converter(field), required))
    return tuple(plan)


def _converter(field: dataclasses.Field[Any]) -> _Convert:
    kind, is_array = _inner(field.type)
    if dataclasses.is_dataclass(kind):
        entity: type = kind  # type: ignore[assignment]
        if is_array:
            return lambda items: None if items is None else tuple(_build(entity, i) for i in items)
        return lambda item: None if item is None else _build(entity, item)
    scalar = _SCALARS.get(field.metadata.get("kafka_type", ""), _same)
    if is_array:
        return lambda items: None if items is None else tuple(scalar(i) for i in items)
    return scalar


def _inner(annotation: Any) -> tuple[Any, bool]:
    """The element type of an annotation (``X | None`` and ``tuple[X, ...]`` unwrapped) and
    whether it is an array."""
    if get_origin(annotation) in (types.UnionType, Union):
        annotation = next(a for a in get_args(annotation) if a is not type(None))
    if get_origin(annotation) is tuple:
        return _inner(get_args(annotation)[0])[0], True
    return annotation, False


def _same(value: Any) -> Any:
    return value


def _error_code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.unknown_server_error


def _millis(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def _instant(value: int) -> datetime.datetime | None:
    """A timestamp in ms; -1 (Kafka's "none") as None."""
    if value < 0:
        return None
    return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)


_SCALARS: dict[str, _Convert] = {
    "error_code": _error_code,
    "timedelta_i32": _millis,
    "timedelta_i64": _millis,
    "datetime_i64": _instant,
}
