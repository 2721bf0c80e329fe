"""Compatibility levels applied: which registered versions a new schema is checked against,
in which direction, by its format's checker.

Confluent's rules: BACKWARD — the new schema reads data written with the latest version;
FORWARD — the latest version reads data written with the new one; FULL — both. The
``_TRANSITIVE`` forms check every live version instead of the latest only; NONE checks nothing.
``previous`` is oldest first and holds live (not soft-deleted) versions only.
"""

from __future__ import annotations

from collections.abc import Sequence

from yak_schema_registry.formats import avro_format, json_format, protobuf_format
from yak_schema_registry.formats.model import (
    CompatibilityLevel,
    ParsedSchema,
    SchemaSource,
    SchemaType,
)

__all__ = ["check_compatibility", "incompatibilities", "parse_schema"]


def parse_schema(source: SchemaSource, resolved: Sequence[tuple[str, str]]) -> ParsedSchema:
    """Parse with the format of ``source.schema_type``; ``InvalidSchemaError`` if it fails.
    ``resolved``: the referenced schemas' ``(name, text)``, dependencies first."""
    match source.schema_type:
        case SchemaType.AVRO:
            return avro_format.parse(source, resolved)
        case SchemaType.JSON:
            return json_format.parse(source, resolved)
        case SchemaType.PROTOBUF:
            return protobuf_format.parse(source, resolved)


def incompatibilities(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Why ``reader`` cannot read what ``writer`` wrote (empty: it can)."""
    if reader.schema_type is not writer.schema_type:
        return [f"schema type {reader.schema_type} cannot read {writer.schema_type} data"]
    match reader.schema_type:
        case SchemaType.AVRO:
            return avro_format.incompatibilities(reader, writer)
        case SchemaType.JSON:
            return json_format.incompatibilities(reader, writer)
        case SchemaType.PROTOBUF:
            return protobuf_format.incompatibilities(reader, writer)


def check_compatibility(
    level: CompatibilityLevel, new: ParsedSchema, previous: Sequence[ParsedSchema]
) -> list[str]:
    """Every reason ``new`` breaks ``level`` against ``previous`` (empty: compatible)."""
    if level is CompatibilityLevel.NONE or not previous:
        return []
    against = previous if level.transitive else previous[-1:]
    messages: list[str] = []
    for old in reversed(against):
        if level.backward:
            messages += [f"reading older data: {m}" for m in incompatibilities(new, old)]
        if level.forward:
            messages += [f"older readers: {m}" for m in incompatibilities(old, new)]
    return messages
