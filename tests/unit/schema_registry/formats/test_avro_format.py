"""Avro schemas: fastavro and avro decide validity, avro's checker decides compatibility."""

from __future__ import annotations

import json

import pytest

from tests.unit.schema_registry.conftest import avro_record
from yak_schema_registry.errors import InvalidSchemaError
from yak_schema_registry.formats.avro_format import incompatibilities, parse
from yak_schema_registry.formats.model import Reference, SchemaSource, SchemaType

INT_A = {"name": "a", "type": "int"}


def _parse(text: str, resolved: list[tuple[str, str]] | None = None) -> object:
    return parse(SchemaSource(SchemaType.AVRO, text), resolved or [])


def test_spacing_and_key_order_do_not_change_the_identity() -> None:
    one = parse(SchemaSource(SchemaType.AVRO, avro_record(INT_A)), [])
    spaced = json.dumps(
        {"fields": [{"type": "int", "name": "a"}], "name": "User", "type": "record"}, indent=4
    )
    other = parse(SchemaSource(SchemaType.AVRO, spaced), [])
    assert one.identity == other.identity
    assert one.text == avro_record(INT_A).replace(", ", ",").replace(": ", ":")


def test_field_order_changes_the_identity() -> None:
    b = {"name": "b", "type": "string"}
    first = parse(SchemaSource(SchemaType.AVRO, avro_record(INT_A, b)), [])
    second = parse(SchemaSource(SchemaType.AVRO, avro_record(b, INT_A)), [])
    assert first.identity != second.identity


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "not JSON"),
        (avro_record({"name": "a", "type": "integer"}), "integer"),
        (json.dumps({"type": "record", "name": "R"}), "fields"),
        (json.dumps({"type": "enum", "name": "E", "symbols": ["A", "A"]}), "A"),
        (avro_record({"name": "a", "type": "int", "default": "x"}), "Default value"),
    ],
)
def test_invalid_schemas_are_refused(text: str, problem: str) -> None:
    with pytest.raises(InvalidSchemaError, match=problem):
        _parse(text)


def test_a_reference_defines_a_named_type_for_the_schema() -> None:
    address = json.dumps({"type": "record", "name": "Address", "fields": [INT_A]})
    text = avro_record({"name": "home", "type": "Address"})
    with pytest.raises(InvalidSchemaError, match="Address"):
        _parse(text)
    source = SchemaSource(SchemaType.AVRO, text, (Reference("Address", "address", 1),))
    parsed = parse(source, [("Address", address)])
    assert parsed.references == (Reference("Address", "address", 1),)


def test_an_added_field_without_default_cannot_read_old_data() -> None:
    old = parse(SchemaSource(SchemaType.AVRO, avro_record(INT_A)), [])
    new = parse(SchemaSource(SchemaType.AVRO, avro_record(INT_A, {"name": "b", "type": "int"})), [])
    problems = incompatibilities(new, old)
    assert len(problems) == 1
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in problems[0]
    assert "/fields/1" in problems[0]
    assert incompatibilities(old, new) == []  # old readers skip the new field


def test_int_widens_to_long_but_not_back() -> None:
    ints = parse(SchemaSource(SchemaType.AVRO, avro_record(INT_A)), [])
    longs = parse(SchemaSource(SchemaType.AVRO, avro_record({"name": "a", "type": "long"})), [])
    assert incompatibilities(longs, ints) == []
    assert "TYPE_MISMATCH" in incompatibilities(ints, longs)[0]
