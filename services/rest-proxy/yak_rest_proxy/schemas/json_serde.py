"""JSON Schema keys and values: any JSON in, validated, framed UTF-8 JSON out, and back.

The validator is ``jsonschema``'s for the schema's ``$schema`` draft (2020-12 when it names
none), built once per schema id after checking the schema against its metaschema. The payload
is the compact JSON text orjson writes (what Confluent's serializers write: UTF-8 JSON after
the header); reading parses it back. Thread-safe once built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import orjson
from jsonschema import exceptions as jsonschema_errors
from jsonschema.validators import validator_for

from yak_rest_proxy.schemas.errors import InvalidSchemaError, RecordConversionError
from yak_rest_proxy.schemas.schema_type import SchemaType
from yak_rest_proxy.schemas.wire import frame

__all__ = ["JsonSchemaSerde"]


class JsonSchemaSerde:
    """One registered JSON Schema's encoder and decoder."""

    __slots__ = ("_header", "_validator", "schema_id")
    schema_type: ClassVar[SchemaType] = SchemaType.JSON

    def __init__(self, schema_id: int, text: str) -> None:
        self.schema_id = schema_id
        self._header = frame(schema_id, b"")
        try:
            schema = orjson.loads(text)
            cls = validator_for(schema)
            cls.check_schema(schema)
        except (orjson.JSONDecodeError, jsonschema_errors.SchemaError) as exc:
            message = getattr(exc, "message", str(exc))
            raise InvalidSchemaError(f"Invalid JSON schema {schema_id}: {message}") from None
        self._validator = cls(schema)

    def encode(self, value: Any, where: str) -> bytes:
        """``value`` framed with this schema; ``RecordConversionError`` if it does not fit."""
        error = jsonschema_errors.best_match(self._validator.iter_errors(value))
        if error is not None:
            path = "".join(f"[{p!r}]" for p in error.absolute_path)
            raise RecordConversionError(
                f"{where}{path}: does not match JSON schema {self.schema_id}: {error.message}"
            )
        return self._header + orjson.dumps(value)

    def encode_many(self, values: list[Any], where: Callable[[int], str]) -> list[bytes]:
        """Each of ``values`` framed (``where(i)`` names the i-th in an error)."""
        return [self.encode(value, where(i)) for i, value in enumerate(values)]

    def decode(self, payload: memoryview) -> Any:
        """The JSON value of a payload (the bytes after the 5-byte header)."""
        return orjson.loads(payload)
