"""What every schema format's encoder/decoder offers, and which one a schema type gets.

A ``Serde`` belongs to one registered schema id: ``encode`` turns a JSON value into framed
bytes (header and payload, ``wire``) or raises ``RecordConversionError`` (``encode_many``: a
request's values at once); ``decode`` turns the
bytes after the header back into a JSON-ready value. Built once per id (``Schemas`` caches
them); building refuses a schema the proxy cannot compile (``InvalidSchemaError``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from yak_rest_proxy.schemas.avro_serde import AvroSerde
from yak_rest_proxy.schemas.json_serde import JsonSchemaSerde
from yak_rest_proxy.schemas.protobuf_serde import ProtobufSerde
from yak_rest_proxy.schemas.schema_type import SchemaType

__all__ = ["SchemaType", "Serde", "build_serde"]


class Serde(Protocol):
    """One schema id's encoder and decoder."""

    schema_type: ClassVar[SchemaType]
    schema_id: int

    def encode(self, value: Any, where: str) -> bytes: ...

    def encode_many(self, values: list[Any], where: Callable[[int], str]) -> list[bytes]: ...

    def decode(self, payload: memoryview) -> Any: ...


def build_serde(schema_type: SchemaType, schema_id: int, text: str) -> Serde:
    """The encoder/decoder of a registered schema."""
    if schema_type is SchemaType.AVRO:
        return AvroSerde(schema_id, text)
    if schema_type is SchemaType.JSON:
        return JsonSchemaSerde(schema_id, text)
    return ProtobufSerde(schema_id, text)
