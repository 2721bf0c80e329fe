"""Rendering stored records as the native API's JSON, on the consume hot path.

``renderer(key, value, header encodings)`` returns a function of ``(topic, partition,
record)`` giving ``ConsumedRecord``'s JSON as a plain dict, with the decoder of each field
chosen once per request instead of once per field: a pydantic model per record, then a dict
built through ``decode_data``'s branches per field, cost several times what decoding the record
from its batch did. ``partition_renderer`` gives the same dicts for a partition's records at
once (one comprehension, no call per record: what a poll answer uses). Values and keys read
back exactly as ``yak.api.records.decode_data`` says (``json``: the JSON value, or the UTF-8
text of bytes that are not JSON; ``string``: the text; ``base64``: the base64 text), which the
tests compare field by field.

Stored JSON values are parsed and serialized again, not passed through as ``orjson.Fragment``:
orjson reads integers beyond 64 bits as floats, so for those the stored bytes and the value
the API gives differ, and telling such values apart (a scan for long digit runs) costs more
than the serialization it would save: ~0.16 µs of a 1 KiB value's ~1.5 µs render.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import orjson

from yak.api.records import Encoding, HeaderEncoding
from yak.record import Record

__all__ = ["PartitionRenderer", "Renderer", "partition_renderer", "renderer"]

Renderer = Callable[[str, int, Record], dict[str, Any]]
PartitionRenderer = Callable[[str, int, Sequence[Record]], list[dict[str, Any]]]
_Decode = Callable[[bytes], Any]
_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _json(data: bytes) -> Any:
    try:
        return _loads(data)
    except _JSONDecodeError:
        return data.decode("utf-8", errors="replace")


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


_DECODERS: dict[Encoding, _Decode] = {
    Encoding.STRING: _text,
    Encoding.JSON: _json,
    Encoding.BASE64: _base64,
}


def _headers(
    headers: tuple[tuple[str, bytes | None], ...], decode: _Decode
) -> list[dict[str, Any]]:
    return [{"key": k, "value": None if v is None else decode(v)} for k, v in headers]


@cache
def renderer(key: Encoding, value: Encoding, header: HeaderEncoding) -> Renderer:
    """The record renderer for these encodings (see the module docstring)."""
    decode_key = _DECODERS[key]
    decode_value = _DECODERS[value]
    decode_header = _text if header is HeaderEncoding.STRING else _base64

    def render(topic: str, partition: int, record: Record) -> dict[str, Any]:
        offset, timestamp, k, v, headers = record
        return {
            "topic": topic,
            "partition": partition,
            "offset": offset,
            "timestamp": timestamp,
            "key": None if k is None else decode_key(k),
            "value": None if v is None else decode_value(v),
            "headers": _headers(headers, decode_header) if headers else [],
        }

    return render


@cache
def partition_renderer(key: Encoding, value: Encoding, header: HeaderEncoding) -> PartitionRenderer:
    """The renderer of a partition's records for these encodings: ``renderer``'s dicts."""
    decode_key = _DECODERS[key]
    decode_value = _DECODERS[value]
    decode_header = _text if header is HeaderEncoding.STRING else _base64

    def render(topic: str, partition: int, records: Sequence[Record]) -> list[dict[str, Any]]:
        return [
            {
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "timestamp": timestamp,
                "key": None if k is None else decode_key(k),
                "value": None if v is None else decode_value(v),
                "headers": _headers(headers, decode_header) if headers else [],
            }
            for offset, timestamp, k, v, headers in records
        ]

    return render
