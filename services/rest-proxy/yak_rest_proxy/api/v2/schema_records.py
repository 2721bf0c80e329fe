"""v2 produce in the schema formats (avro, jsonschema, protobuf): which schema encodes the
keys, which the values.

Confluent's rules: ``key_schema_id`` / ``value_schema_id`` name a registered schema (which
must be of the request's format); else ``key_schema`` / ``value_schema`` give its text, which
is registered under ``<topic>-key`` / ``<topic>-value`` (TopicNameStrategy) — or found there
already — on first use. Keys present with neither is 422 / 42201, values 422 / 42202. A
schema given is resolved even when no record needs it, so its id is in the answer. Every
record is encoded before any is sent: one record the schema refuses (422 / 42203) writes
nothing.
"""

from __future__ import annotations

from typing import Any

from yak_rest_proxy.api.v2.produce_body import SchemaFields
from yak_rest_proxy.http.content import EmbeddedFormat
from yak_rest_proxy.schemas import SchemaMissingError, Schemas, SchemaType, Serde

__all__ = ["RecordSerdes", "encode_column", "record_serdes"]

RecordSerdes = tuple[Serde | None, Serde | None]


async def _serde(
    schemas: Schemas,
    schema_type: SchemaType,
    subject: str,
    schema_id: int | None,
    text: str | None,
) -> Serde | None:
    if schema_id is not None:
        return await schemas.by_id(schema_id, schema_type)
    if text is not None:
        return await schemas.by_schema(subject, schema_type, text)
    return None


async def record_serdes(
    schemas: Schemas,
    fmt: EmbeddedFormat,
    topic: str,
    fields: SchemaFields,
    records: list[tuple[Any, Any, int | None]],
) -> RecordSerdes:
    """The key and value encoders of a request in schema format ``fmt``."""
    schemas.check_enabled(f"the {fmt.value} format")
    schema_type = SchemaType.of_format(fmt.value)
    key = await _serde(
        schemas, schema_type, f"{topic}-key", fields.key_schema_id, fields.key_schema
    )
    value = await _serde(
        schemas, schema_type, f"{topic}-value", fields.value_schema_id, fields.value_schema
    )
    if key is None and any(k is not None for k, _, _ in records):
        raise SchemaMissingError(
            "Request includes keys but does not include key schema", field="key"
        )
    if value is None and any(v is not None for _, v, _ in records):
        raise SchemaMissingError(
            "Request includes values but does not include value schema", field="value"
        )
    return key, value


def encode_column(serde: Serde | None, given: list[Any], field: str) -> list[bytes | None]:
    """Every record's key (or value) in the wire format, at once; None stays a null key or
    value."""
    present = [i for i, value in enumerate(given) if value is not None]
    out: list[bytes | None] = [None] * len(given)
    if serde is None or not present:
        return out
    encoded = serde.encode_many(
        [given[i] for i in present], lambda k: f"records[{present[k]}].{field}"
    )
    for i, data in zip(present, encoded, strict=True):
        out[i] = data
    return out
