"""JSON schemas: valid when their draft's metaschema says so; compatibility is not checked."""

from __future__ import annotations

import json

import pytest

from yak_schema_registry.errors import InvalidSchemaError
from yak_schema_registry.formats.json_format import incompatibilities, parse
from yak_schema_registry.formats.model import Reference, SchemaSource, SchemaType

OBJECT = {"type": "object", "properties": {"a": {"type": "integer"}}}


def _source(document: object, *refs: Reference) -> SchemaSource:
    return SchemaSource(SchemaType.JSON, json.dumps(document), refs)


def test_a_valid_schema_keeps_its_text_compact_and_validates() -> None:
    parsed = parse(_source(OBJECT), [])
    assert parsed.text == json.dumps(OBJECT, separators=(",", ":"))
    validator = parsed.parsed
    assert validator.is_valid({"a": 1})  # type: ignore[attr-defined]
    assert not validator.is_valid({"a": "x"})  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ({"type": "nope"}, "not valid"),
        ({"type": "object", "required": "a"}, "not of type 'array'"),
        ({"$schema": "http://json-schema.org/draft-07/schema#", "minimum": "1"}, "number"),
        ([1, 2], "not an object or a boolean"),
    ],
)
def test_schemas_their_metaschema_refuses_are_invalid(document: object, problem: str) -> None:
    with pytest.raises(InvalidSchemaError, match=problem):
        parse(_source(document), [])


def test_a_reference_is_resolved_by_its_name() -> None:
    ref = Reference("https://example.com/address.json", "address", 1)
    address = {"type": "object", "required": ["city"]}
    document = {"type": "object", "properties": {"home": {"$ref": ref.name}}}
    parsed = parse(_source(document, ref), [(ref.name, json.dumps(address))])
    validator = parsed.parsed
    assert validator.is_valid({"home": {"city": "Oslo"}})  # type: ignore[attr-defined]
    assert not validator.is_valid({"home": {}})  # type: ignore[attr-defined]


def test_compatibility_is_not_checked() -> None:
    old = parse(_source(OBJECT), [])
    new = parse(_source({"type": "string"}), [])
    assert incompatibilities(new, old) == []
