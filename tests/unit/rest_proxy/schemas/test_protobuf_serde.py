"""Protobuf from ``.proto`` text and from descriptors, agreeing with Confluent's
ProtobufSerializer/ProtobufDeserializer."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import json_format
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message_factory import GetMessageClass

from yak_rest_proxy.schemas.errors import (
    InvalidSchemaError,
    RecordConversionError,
    RecordDeserializationError,
)
from yak_rest_proxy.schemas.proto_descriptor import file_descriptor
from yak_rest_proxy.schemas.protobuf_serde import ProtobufSerde
from yak_rest_proxy.schemas.wire import encode_message_indexes, frame, unframe

PROTO = """
syntax = "proto3";
package yak.test;
import "google/protobuf/timestamp.proto";

message User {
  string name = 1;
  repeated int32 scores = 2;
  map<string, int64> counts = 3;
  Address address = 4;
  enum Kind { A = 0; B = 1; }
  Kind kind = 5;
  optional bool active = 6;
  oneof contact { string email = 7; string phone = 8; }
  google.protobuf.Timestamp seen = 9;
  message Address { string city = 1; }
}

message Other { double x = 1; }
"""
USER = {
    "name": "ann",
    "scores": [1, 2],
    "counts": {"a": "5"},
    "address": {"city": "Oslo"},
    "kind": "B",
    "active": False,
    "email": "a@b",
    "seen": "2024-01-01T00:00:00Z",
}


def decode(serde: ProtobufSerde, data: bytes) -> Any:
    schema_id, payload = unframe(data)
    assert schema_id == serde.schema_id
    return serde.decode(payload)


def test_round_trip_from_proto_text() -> None:
    serde = ProtobufSerde(3, PROTO)
    data = serde.encode(USER, "records[0].value")
    assert data[:6] == b"\x00\x00\x00\x00\x03\x00"  # header, then the message indexes [0]
    assert decode(serde, data) == USER


def test_defaults_come_out_and_json_names_go_in() -> None:
    serde = ProtobufSerde(3, PROTO)
    back = decode(serde, serde.encode({"name": "x"}, "v"))
    assert (back["scores"], back["kind"], back["name"]) == ([], "A", "x")
    assert "active" not in back  # proto3 optional: has presence, unset stays out


def test_other_messages_are_read_by_their_indexes() -> None:
    serde = ProtobufSerde(3, PROTO)
    pool = DescriptorPool()
    pool.Add(
        file_descriptor(
            PROTO.replace('import "google/protobuf/timestamp.proto";', "").replace(
                "google.protobuf.Timestamp seen = 9;", ""
            ),
            "x.proto",
        )
    )
    other = json_format.ParseDict(
        {"x": 2.5}, GetMessageClass(pool.FindMessageTypeByName("yak.test.Other"))()
    )
    address = json_format.ParseDict(
        {"city": "Rome"}, GetMessageClass(pool.FindMessageTypeByName("yak.test.User.Address"))()
    )
    data = frame(3, encode_message_indexes([1]) + other.SerializeToString())
    assert decode(serde, data) == {"x": 2.5}
    # As protoc does, the map's entry message is nested where the map is declared: 0.
    data = frame(3, encode_message_indexes([0, 1]) + address.SerializeToString())
    assert decode(serde, data) == {"city": "Rome"}
    with pytest.raises(RecordDeserializationError, match="name no message"):
        decode(serde, frame(3, encode_message_indexes([2])))


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ({"nmae": "x"}, "no field named"),
        ({"scores": ["a"]}, "scores"),
        ({"kind": "C"}, "kind"),
        ([1, 2], "JSON object"),
    ],
)
def test_values_the_schema_refuses(value: Any, why: str) -> None:
    with pytest.raises(RecordConversionError, match=why):
        ProtobufSerde(3, PROTO).encode(value, "records[0].value")


@pytest.mark.parametrize(
    "text",
    [
        "message {",
        'syntax = "proto3"; message A { Missing m = 1; }',
        'syntax = "proto3"; message A { int32 a = 1; int32 b = 1; }',
        'syntax = "proto3"; import "other.proto"; message A { int32 a = 1; }',
        'syntax = "proto3"; enum E { X = 0; }',
    ],
)
def test_schemas_the_proxy_cannot_compile(text: str) -> None:
    with pytest.raises(InvalidSchemaError, match="schema 5"):
        ProtobufSerde(5, text)


def test_agrees_with_confluents_serializers(confluent_registry: SchemaRegistryClient) -> None:
    """Confluent's Python serializer registers a base64 descriptor; the proxy reads it, and
    Confluent's deserializer reads what the proxy writes."""
    pool = DescriptorPool()
    pool.Add(
        file_descriptor(
            "syntax = 'proto3'; package p; message M { string s = 1; int64 n = 2; }", "m.proto"
        )
    )
    cls = GetMessageClass(pool.FindMessageTypeByName("p.M"))
    ctx = SerializationContext("t", MessageField.VALUE)
    serializer = ProtobufSerializer(cls, confluent_registry, {"use.deprecated.format": False})
    theirs = serializer(json_format.ParseDict({"s": "hi", "n": 7}, cls()), ctx)
    assert theirs is not None
    schema_id, _ = unframe(theirs)
    registered = confluent_registry.get_schema(schema_id)
    assert registered.schema_str is not None
    base64.b64decode(registered.schema_str, validate=True)  # a descriptor, as registered
    serde = ProtobufSerde(schema_id, registered.schema_str)
    assert decode(serde, theirs) == {"s": "hi", "n": "7"}
    ours = serde.encode({"s": "yo", "n": 8}, "v")
    back = ProtobufDeserializer(cls, {"use.deprecated.format": False})(ours, ctx)
    assert (back.s, back.n) == ("yo", 8)
