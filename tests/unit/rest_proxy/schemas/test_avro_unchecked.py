"""Validating only what the writer does not check changes nothing: for every field type and
every kind of JSON value, ``AvroSerde`` writes exactly what fastavro's full validator and
public writer would, and refuses exactly what they refuse."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import orjson
import pytest
from fastavro.validation import validate

from yak_rest_proxy.schemas import avro_serde
from yak_rest_proxy.schemas.avro_serde import AvroSerde
from yak_rest_proxy.schemas.avro_unchecked import UncheckedColumns
from yak_rest_proxy.schemas.errors import RecordConversionError
from yak_rest_proxy.schemas.wire import frame

ENUM = {"type": "enum", "name": "Kind", "symbols": ["VIEW", "BUY"]}
TYPES: list[Any] = [
    "null",
    "boolean",
    "int",
    "long",
    "float",
    "double",
    "string",
    "bytes",
    {"type": "string"},
    ENUM,
    {"type": "fixed", "name": "Three", "size": 3},
    {"type": "array", "items": "string"},
    {"type": "array", "items": "int"},
    {"type": "map", "values": "int"},
    {"type": "record", "name": "Inner", "fields": [{"name": "a", "type": "int"}]},
    ["null", "string"],
    ["null", "int", "double"],
    ["string", {"type": "array", "items": "long"}],
    {"type": "int", "logicalType": "date"},
    {"type": "long", "logicalType": "timestamp-millis"},
    {"type": "string", "logicalType": "uuid"},
]
#: One of each kind of JSON value, and the edges of the numeric types.
VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**31,
    2**63,
    1.5,
    1.0,
    "",
    "abc",
    "VIEW",
    "\u00ff\u0001x",
    "6f1d3a0c-7c7e-4b0e-9a3a-0c1c1f3e2a10",
    [],
    [1],
    ["a"],
    {},
    {"a": 1},
    {"int": 5},
    {"string": "x"},
]


def record(field_type: Any) -> dict[str, Any]:
    """``field_type`` between two fields the writer checks (so some are dropped)."""
    return {
        "type": "record",
        "name": "R",
        "namespace": "yak.test",
        "fields": [
            {"name": "s", "type": "string"},
            {"name": "f", "type": field_type},
            {"name": "u", "type": ["null", "long"], "default": None},
        ],
    }


def valid(value: Any, parsed: Any) -> bool:
    """fastavro's validator (whose logical types' converters may raise: a refusal too)."""
    try:
        return bool(validate(value, parsed, raise_errors=False))
    except ValueError:
        return False


def reference(schema: Any, value: Any) -> bytes | None:
    """What fastavro's public API accepts: the value as given if the validator takes it, else
    its reading as Avro's JSON encoding if the validator takes that; None if neither."""
    parsed = fastavro.parse_schema(schema)
    if not valid(value, parsed):
        try:
            value = next(fastavro.json_reader(io.StringIO(orjson.dumps(value).decode()), parsed))
        except Exception:  # the JSON reader raises many kinds on a misfit
            return None
        if not valid(value, parsed):
            return None
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, value)
    return frame(9, out.getvalue())


@pytest.mark.parametrize("field_type", TYPES, ids=[json.dumps(t)[:40] for t in TYPES])
def test_writes_and_refuses_what_the_full_validator_does(field_type: Any) -> None:
    schema = record(field_type)
    serde = AvroSerde(9, json.dumps(schema))
    disagree = []
    for given in VALUES:
        value = {"s": "x", "f": given}
        expected = reference(schema, value)
        for count in (1, 5):  # alone (checked whole), in a request (checked by column)
            try:
                got = serde.encode_many([value] * count, str)
            except RecordConversionError:
                got = None
            if got != (None if expected is None else [expected] * count):
                disagree.append((given, count, expected, got))
    assert disagree == []


@pytest.mark.parametrize("field_type", TYPES, ids=[json.dumps(t)[:40] for t in TYPES])
def test_a_request_of_fitting_values_is_written_as_each_alone(field_type: Any) -> None:
    schema = record(field_type)
    values = [{"s": "x", "f": given} for given in VALUES]
    fitting = [v for v in values if reference(schema, v) is not None] * 4  # by column
    assert fitting
    written = AvroSerde(9, json.dumps(schema)).encode_many(fitting, str)
    assert written == [reference(schema, v) for v in fitting]


def test_a_request_with_one_misfit_in_a_dropped_field_is_refused_whole() -> None:
    serde = AvroSerde(9, json.dumps(record("long")))
    values: list[Any] = [{"s": "a", "f": 1}, {"s": 5, "f": 2}, {"s": "c", "f": 3}]
    with pytest.raises(RecordConversionError, match=r"records\[1\]\.value: .*R\.s"):
        serde.encode_many(values, lambda i: f"records[{i}].value")
    values[1] = {"s": "b", "f": 2, "u": {"long": 7}}  # Avro's JSON encoding of the union
    written = serde.encode_many(values, lambda i: f"records[{i}].value")
    assert written == [reference(record("long"), v) for v in values]


def test_the_fields_left_to_validate() -> None:
    schema = record("long")
    schema["fields"] += [
        {"name": "e", "type": ENUM},
        {"name": "again", "type": "yak.test.Kind"},
        {"name": "b", "type": "bytes"},
        {"name": "t", "type": {"type": "array", "items": "string"}},
        {"name": "rec", "type": {"type": "record", "name": "In", "fields": []}},
        {"name": "rec2", "type": "In"},
    ]
    named: dict[str, Any] = {}
    columns = UncheckedColumns.of(fastavro.parse_schema(schema, named), named)
    assert columns is not None
    assert columns.names == ["f", "b", "t", "rec", "rec2"]
    assert UncheckedColumns.of(fastavro.parse_schema(["null", "string"]), {}) is None
    assert UncheckedColumns.of(fastavro.parse_schema("string"), {}) is None


def test_what_fastavro_checks_of_the_record_itself_is_checked_too() -> None:
    schema = record("long")
    named: dict[str, Any] = {}
    columns = UncheckedColumns.of(fastavro.parse_schema(schema, named), named)
    assert columns is not None
    assert columns.valid([{"s": "x", "f": 1}])
    assert not columns.valid([{"s": "x", "f": 1}, {"s": "x"}])  # no default: None, not a long
    assert not columns.valid([{"s": "x", "f": 1, "-type": "yak.test.Other"}])
    assert not columns.valid([["s", "f"]])
    typed = {"s": "x", "f": 1, "-type": "yak.test.Other"}  # refused plain, read as Avro JSON
    assert AvroSerde(9, json.dumps(schema)).encode(typed, "v") == reference(schema, typed)


def test_a_kept_field_naming_a_dropped_type_validates_with_the_whole_schema() -> None:
    inner = {"type": "record", "name": "Inner", "fields": [{"name": "a", "type": "int"}]}
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "maybe", "type": ["null", inner], "default": None},
            {"name": "history", "type": {"type": "array", "items": "Inner"}},
        ],
    }
    named: dict[str, Any] = {}
    assert UncheckedColumns.of(fastavro.parse_schema(schema, named), named) is None
    serde = AvroSerde(9, json.dumps(schema))
    good = {"maybe": {"a": 1}, "history": [{"a": 2}]}
    assert serde.encode(good, "v") == reference(schema, good)
    with pytest.raises(RecordConversionError, match=r"Inner\.a"):
        serde.encode({"history": [{"a": 1.5}]}, "v")


def test_a_fitting_request_is_not_validated_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def whole(values: list[Any], *_: object, **__: object) -> bool:
        calls.append(len(values))
        return False

    monkeypatch.setattr(avro_serde, "validate_many", whole)
    serde = AvroSerde(9, json.dumps(record("long")))
    values = [{"s": "x", "f": i} for i in range(10)]
    assert serde.encode_many(values, str) == [reference(record("long"), v) for v in values]
    assert calls == []
    with pytest.raises(RecordConversionError, match=r"10: .*R\.f"):
        serde.encode_many([*values, {"s": "x", "f": 1.5}], str)
    assert calls == [11]  # a misfit: the whole check, which names it
