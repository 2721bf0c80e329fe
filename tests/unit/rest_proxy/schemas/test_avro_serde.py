"""Avro encoding and decoding, agreeing with Confluent's AvroSerializer/AvroDeserializer."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from yak_rest_proxy.schemas.avro_serde import AvroSerde, plain_json
from yak_rest_proxy.schemas.errors import InvalidSchemaError, RecordConversionError
from yak_rest_proxy.schemas.wire import unframe

USER = {
    "type": "record",
    "name": "User",
    "namespace": "yak.test",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": ["null", "int"], "default": None},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
    ],
}
BLOB = {
    "type": "record",
    "name": "Blob",
    "fields": [{"name": "blob", "type": "bytes"}, {"name": "n", "type": ["null", "long"]}],
}
CTX = SerializationContext("t", MessageField.VALUE)


def decode(serde: AvroSerde, data: bytes) -> Any:
    schema_id, payload = unframe(data)
    assert schema_id == serde.schema_id
    return serde.decode(payload)


def test_round_trip_of_plain_json() -> None:
    serde = AvroSerde(7, json.dumps(USER))
    value = {"name": "ann", "age": 3, "kind": "B", "tags": ["x"]}
    data = serde.encode(value, "records[0].value")
    assert data[:5] == b"\x00\x00\x00\x00\x07"
    assert decode(serde, data) == value
    assert decode(serde, serde.encode({"name": "b", "kind": "A"}, "v"))["tags"] == []


def test_avro_json_encoding_of_unions_and_bytes_is_read_too() -> None:
    serde = AvroSerde(1, json.dumps(USER))
    data = serde.encode({"name": "b", "age": {"int": 5}, "kind": "A"}, "v")
    assert decode(serde, data)["age"] == 5
    blob = AvroSerde(2, json.dumps(BLOB))
    back = decode(blob, blob.encode({"blob": "\u00ff\u0001", "n": {"long": 7}}, "v"))
    assert back == {"blob": b"\xff\x01", "n": 7}
    assert orjson.loads(orjson.dumps(back, default=plain_json)) == {"blob": "\u00ff\u0001", "n": 7}


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ({"name": 5, "kind": "A"}, "User.name"),
        ({"name": "x", "kind": "C"}, "User.kind"),
        ({"name": "x", "kind": "A", "age": 1.5}, "User.age"),
        ({"name": "x", "kind": "A", "age": 2**40}, "User.age"),
        ({"kind": "A"}, "User.name"),
        ("just a string", "records"),
    ],
)
def test_values_the_schema_refuses(value: Any, why: str) -> None:
    serde = AvroSerde(1, json.dumps(USER))
    with pytest.raises(RecordConversionError, match=r"records\[2\]\.value") as caught:
        serde.encode(value, "records[2].value")
    assert why in caught.value.message


@pytest.mark.parametrize("text", ["{", '{"type": "record"}', '"nosuchtype"'])
def test_invalid_schemas(text: str) -> None:
    with pytest.raises(InvalidSchemaError, match="Invalid Avro schema 4"):
        AvroSerde(4, text)


def test_agrees_with_confluents_serializers(confluent_registry: SchemaRegistryClient) -> None:
    text = json.dumps(USER)
    schema_id = confluent_registry.register_schema("t-value", Schema(text, "AVRO"))
    serde = AvroSerde(schema_id, text)
    value = {"name": "cy", "age": None, "kind": "A", "tags": ["p", "q"]}
    serializer = AvroSerializer(confluent_registry, text, conf={"auto.register.schemas": False})
    theirs = serializer(value, CTX)
    assert theirs is not None
    assert decode(serde, theirs) == value
    ours = serde.encode(value, "v")
    assert ours == theirs
    assert AvroDeserializer(confluent_registry)(ours, CTX) == value


@pytest.mark.parametrize(
    ("field_type", "good", "given"),
    [
        ({"type": "int", "logicalType": "date"}, 0, "abc"),  # the date converter: ValueError
        ({"type": "long", "logicalType": "timestamp-millis"}, 0, 2**63),  # OverflowError
        ({"type": "map", "values": "int"}, {}, [1]),  # the JSON reader: IndexError
    ],
)
def test_values_fastavro_raises_on_are_refused_not_crashed_on(
    field_type: Any, good: Any, given: Any
) -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "f", "type": field_type}]}
    serde = AvroSerde(3, json.dumps(schema))
    with pytest.raises(RecordConversionError, match=r"records\[1\]\.value: does not match"):
        serde.encode_many([{"f": good}, {"f": given}], lambda i: f"records[{i}].value")
