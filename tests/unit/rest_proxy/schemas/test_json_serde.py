"""JSON Schema encoding and decoding, agreeing with Confluent's JSONSerializer/Deserializer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from yak_rest_proxy.schemas.errors import InvalidSchemaError, RecordConversionError
from yak_rest_proxy.schemas.json_serde import JsonSchemaSerde
from yak_rest_proxy.schemas.wire import unframe

SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["id"],
}


def test_round_trip() -> None:
    serde = JsonSchemaSerde(9, json.dumps(SCHEMA))
    data = serde.encode({"id": 1, "tags": ["a"]}, "v")
    assert data == b'\x00\x00\x00\x00\x09{"id":1,"tags":["a"]}'
    _, payload = unframe(data)
    assert serde.decode(payload) == {"id": 1, "tags": ["a"]}


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ({"tags": []}, "'id' is a required property"),
        ({"id": "1"}, "['id']"),
        ({"id": 1, "tags": [3]}, "['tags'][0]"),
        ([1], "is not of type 'object'"),
    ],
)
def test_values_the_schema_refuses(value: Any, why: str) -> None:
    serde = JsonSchemaSerde(9, json.dumps(SCHEMA))
    with pytest.raises(RecordConversionError) as caught:
        serde.encode(value, "records[0].value")
    assert why in caught.value.message
    assert caught.value.message.startswith("records[0].value")


@pytest.mark.parametrize("text", ["{", '{"type": 5}', '{"minimum": "a"}'])
def test_invalid_schemas(text: str) -> None:
    with pytest.raises(InvalidSchemaError, match="Invalid JSON schema 2"):
        JsonSchemaSerde(2, text)


def test_agrees_with_confluents_serializers(confluent_registry: SchemaRegistryClient) -> None:
    text = json.dumps(SCHEMA)
    schema_id = confluent_registry.register_schema("t-value", Schema(text, "JSON"))
    serde = JsonSchemaSerde(schema_id, text)
    ctx = SerializationContext("t", MessageField.VALUE)
    serializer = JSONSerializer(text, confluent_registry, conf={"auto.register.schemas": False})
    theirs = serializer({"id": 5, "tags": ["z"]}, ctx)
    assert theirs is not None
    _, payload = unframe(theirs)
    assert serde.decode(payload) == {"id": 5, "tags": ["z"]}
    ours = serde.encode({"id": 6}, "v")
    assert JSONDeserializer(text)(ours, ctx) == {"id": 6}
