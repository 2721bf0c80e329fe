"""AVRO schemas: parsed by fastavro and by Apache ``avro``, checked by ``avro.compatibility``.

fastavro decides validity (``fastavro.parse_schema``: unknown types, bad names, bad defaults
...) as Confluent's serializers in Python will read the schema; Apache ``avro`` builds the
``Schema`` objects its ``ReaderWriterCompatibilityChecker`` (the port of Java's
``SchemaCompatibility``) compares. Both must accept a schema for it to be registered.

References are named types defined by other schemas: their texts (dependencies first) are
parsed into the same name table before the schema itself, in both libraries.

The stored text is the client's JSON made compact; the identity is that JSON with sorted keys,
so two texts that differ in spacing or key order are the same schema (the order of record
fields, a JSON list, still matters, as it does to Avro).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import avro.errors
import avro.name
import avro.schema
import fastavro
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType
from fastavro.schema import SchemaParseException, UnknownType

from yak_schema_registry.errors import InvalidSchemaError
from yak_schema_registry.formats.model import ParsedSchema, SchemaSource

__all__ = ["incompatibilities", "parse"]


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidSchemaError(f"Invalid schema{what}: not JSON: {exc}") from None


def parse(source: SchemaSource, resolved: Sequence[tuple[str, str]]) -> ParsedSchema:
    """Parse ``source`` after its references' texts (``(name, text)``, dependencies first)."""
    named: dict[str, Any] = {}
    names = avro.name.Names()
    for name, text in resolved:
        what = f" reference {name!r}"
        _parse_both(_json(text, what), named, names, what)
    document = _json(source.text, "")
    schema = _parse_both(document, named, names, "")
    return ParsedSchema(
        schema_type=source.schema_type,
        text=json.dumps(document, separators=(",", ":"), ensure_ascii=False),
        identity=json.dumps(document, separators=(",", ":"), sort_keys=True),
        references=source.references,
        parsed=schema,
    )


def _parse_both(
    document: Any, named: dict[str, Any], names: avro.name.Names, what: str
) -> avro.schema.Schema:
    try:
        fastavro.parse_schema(document, named_schemas=named, _write_hint=False)
        return avro.schema.make_avsc_object(document, names)
    except (
        SchemaParseException,
        UnknownType,
        avro.errors.AvroException,
        # What either library raises on a document of the wrong shape (a list for a name ...).
        ValueError,
        TypeError,
        KeyError,
        AttributeError,
    ) as exc:
        raise InvalidSchemaError(f"Invalid schema{what}: {exc}") from None


def incompatibilities(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Why ``reader`` cannot read data written with ``writer`` (empty: it can)."""
    assert isinstance(reader.parsed, avro.schema.Schema)
    assert isinstance(writer.parsed, avro.schema.Schema)
    checker = ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]  # avro's __init__
    result = checker.get_compatibility(reader.parsed, writer.parsed)
    if result.compatibility is SchemaCompatibilityType.compatible:
        return []
    # The checker reports kinds in a list but names and locations in sets: one line says all.
    kinds = ", ".join(kind.value.upper() for kind in result.incompatibilities) or "INCOMPATIBLE"
    names = ", ".join(sorted(result.messages))
    where = ", ".join(sorted(result.locations))
    return [f"{kinds}: {names} at {where}" if names else f"{kinds} at {where}"]
