"""fastavro's compiled writer, called directly, writes what its public writer writes."""

from __future__ import annotations

import io
from typing import Any

import fastavro
import pytest

from yak_rest_proxy.schemas import avro_calls
from yak_rest_proxy.schemas.avro_calls import WRITE_OPTIONS, compiled, write_into

SCHEMA = {
    "type": "record",
    "name": "Event",
    "namespace": "yak.test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "other", "type": ["null", "Kind"], "default": None},
        {"name": "price", "type": "double"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "int"}, "default": {}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    ],
}
VALUES: list[dict[str, Any]] = [
    {"id": 1, "name": "a", "kind": "A", "price": 1.5, "tags": [], "day": 0},
    {
        "id": -(2**62),
        "name": "ünï",
        "kind": "B",
        "other": "A",
        "price": 2,
        "tags": ["x", "y"],
        "attrs": {"k": -3},
        "day": 20_000,
    },
]


def public(schema: Any, value: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, value)
    return out.getvalue()


def test_fastavro_is_installed_with_its_compiled_writer() -> None:
    assert compiled()
    assert write_into is not avro_calls._write_with_public_api


@pytest.mark.parametrize(
    "write", [write_into, avro_calls._write_with_public_api], ids=["compiled", "public"]
)
def test_appends_what_schemaless_writer_writes(write: avro_calls.WriteInto) -> None:
    named: dict[str, Any] = {}
    parsed = fastavro.parse_schema(SCHEMA, named)
    out = bytearray(b"head")
    for value in VALUES:
        write(out, value, parsed, named, "", WRITE_OPTIONS)
    assert bytes(out) == b"head" + b"".join(public(parsed, value) for value in VALUES)


@pytest.mark.parametrize(
    "write", [write_into, avro_calls._write_with_public_api], ids=["compiled", "public"]
)
def test_refuses_what_schemaless_writer_refuses(write: avro_calls.WriteInto) -> None:
    named: dict[str, Any] = {}
    parsed = fastavro.parse_schema(SCHEMA, named)
    for bad in ({**VALUES[0], "name": 5}, {**VALUES[0], "kind": "C"}, {"id": 1}):
        with pytest.raises((TypeError, ValueError)):
            public(parsed, bad)
        with pytest.raises((TypeError, ValueError)):
            write(bytearray(), bad, parsed, named, "", WRITE_OPTIONS)
