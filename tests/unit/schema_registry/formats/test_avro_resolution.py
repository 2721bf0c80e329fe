"""Avro compatibility against an independent implementation: fastavro's schema resolution.

For random pairs of record schemas (fields added, removed, retyped through Avro's promotions,
with and without defaults), the registry's verdict (``avro.compatibility`` via
``avro_format.incompatibilities``) must be what fastavro does with real data: compatible
exactly when fastavro reads a record written with the writer's schema through the reader's,
filling the reader's missing fields with their defaults.
"""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest
from fastavro.read import SchemaResolutionError
from hypothesis import given, settings
from hypothesis import strategies as st

from yak_schema_registry.formats.avro_format import incompatibilities, parse
from yak_schema_registry.formats.model import SchemaSource, SchemaType

#: A value of each primitive type, and the default a reader's field of that type may carry.
VALUES: dict[str, Any] = {
    "int": 7,
    "long": 2**40,
    "float": 1.5,
    "double": 2.25,
    "string": "x",
    "bytes": b"y",
    "boolean": True,
}
DEFAULTS: dict[str, Any] = {
    "int": 0,
    "long": 0,
    "float": 0.0,
    "double": 0.0,
    "string": "",
    "bytes": "",
    "boolean": False,
}
NAMES = ("a", "b", "c", "d")


@st.composite
def records(draw: st.DrawFn, *, defaults: bool) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=len(NAMES)))
    fields = []
    for name in names:
        field: dict[str, Any] = {"name": name, "type": draw(st.sampled_from(sorted(VALUES)))}
        if defaults and draw(st.booleans()):
            field["default"] = DEFAULTS[field["type"]]
        fields.append(field)
    return {"type": "record", "name": "R", "fields": fields}


def _fastavro_reads(writer: dict[str, Any], reader: dict[str, Any]) -> dict[str, Any] | None:
    datum = {field["name"]: VALUES[field["type"]] for field in writer["fields"]}
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(writer), datum)
    buffer.seek(0)
    try:
        result = fastavro.schemaless_reader(
            buffer, fastavro.parse_schema(writer), fastavro.parse_schema(reader)
        )
    except SchemaResolutionError:
        return None
    assert isinstance(result, dict)
    return result


def _verdict(writer: dict[str, Any], reader: dict[str, Any]) -> list[str]:
    def parsed(document: dict[str, Any]) -> Any:
        return parse(SchemaSource(SchemaType.AVRO, json.dumps(document)), [])

    return incompatibilities(parsed(reader), parsed(writer))


@settings(max_examples=300, deadline=None)
@given(writer=records(defaults=False), reader=records(defaults=True))
def test_the_verdict_is_what_fastavro_does_with_data(
    writer: dict[str, Any], reader: dict[str, Any]
) -> None:
    read = _fastavro_reads(writer, reader)
    problems = _verdict(writer, reader)
    assert (read is not None) == (problems == []), (problems, read)
    if read is not None:
        assert sorted(read) == sorted(field["name"] for field in reader["fields"])
        written = {field["name"] for field in writer["fields"]}
        for field in reader["fields"]:
            if field["name"] not in written:
                assert read[field["name"]] == field["default"]


@pytest.mark.parametrize(
    ("writer", "reader"),
    [("int", "long"), ("int", "double"), ("long", "float"), ("string", "bytes")],
)
def test_promotions_are_compatible_one_way(writer: str, reader: str) -> None:
    def record(kind: str) -> dict[str, Any]:
        return {"type": "record", "name": "R", "fields": [{"name": "a", "type": kind}]}

    assert _verdict(record(writer), record(reader)) == []
    assert _fastavro_reads(record(writer), record(reader)) is not None
    if (writer, reader) != ("string", "bytes"):  # bytes and string promote both ways
        assert _verdict(record(reader), record(writer)) != []
        assert _fastavro_reads(record(reader), record(writer)) is None
