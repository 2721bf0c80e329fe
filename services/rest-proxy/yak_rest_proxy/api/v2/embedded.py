"""Keys and values embedded in v2 JSON bodies: base64 strings (binary) or JSON (json).

Going in, a binary key or value must be a base64 string (standard alphabet, padding checked)
and becomes its bytes; a JSON one is any JSON value and is stored as its compact JSON text. A
JSON ``null`` is a null key or value (a tombstone) in both formats. Coming out, bytes become
base64 (binary) or are parsed as JSON (json); bytes that are not JSON — written by another kind
of producer — come out as one JSON string of their UTF-8 text (invalid sequences replaced), so
one odd record never blocks a JSON consumer.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson

from yak.api.records import json_bytes
from yak.errors import InvalidRequestError
from yak_rest_proxy.http.content import EmbeddedFormat

__all__ = ["from_embedded", "to_embedded"]


def from_embedded(value: Any, fmt: EmbeddedFormat, index: int, field: str) -> bytes | None:
    """The bytes of an embedded key or value (``records[index].field``); 422
    (``invalid_data``) if it is not valid."""
    if value is None:
        return None
    if fmt is EmbeddedFormat.JSON:
        return json_bytes(value, f"records[{index}].{field}")
    if not isinstance(value, str):
        raise InvalidRequestError(
            f"records[{index}].{field}: binary data must be a base64 string, "
            f"not {type(value).__name__}",
            kind="invalid_data",
        )
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequestError(
            f"records[{index}].{field}: not valid base64", kind="invalid_data"
        ) from None


def to_embedded(data: bytes | None, fmt: EmbeddedFormat) -> Any:
    """An embedded key or value for a record read in ``fmt``."""
    if data is None:
        return None
    if fmt is EmbeddedFormat.BINARY:
        return base64.b64encode(data).decode("ascii")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data.decode("utf-8", errors="replace")
