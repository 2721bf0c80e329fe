"""Protobuf keys and values: JSON in, Protobuf binary framed out, and back.

A registered schema is ``.proto`` text (turned into a descriptor by ``proto_descriptor``) or
a base64 ``FileDescriptorProto`` (what Confluent's Python serializer registers); either is
added to a fresh ``DescriptorPool`` of its own, with the Google well-known types it imports,
and its message classes come from ``message_factory``. Records are written with the file's
first message (message indexes ``[0]``, Confluent's default); reading follows the indexes each
record carries, so any message of the file reads. JSON goes in through ``json_format.ParseDict``
(Protobuf's JSON mapping: field names or their lowerCamel JSON names, enums by name or number,
64-bit integers as numbers or strings) and comes out through ``MessageToDict`` with the
``.proto`` field names and every field, defaults included. Thread-safe once built.
"""

from __future__ import annotations

import base64
import binascii
import importlib
from collections.abc import Callable
from typing import Any, ClassVar

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FileDescriptor
from google.protobuf.descriptor_pb2 import FileDescriptorProto
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass

from yak_rest_proxy.schemas.errors import (
    InvalidSchemaError,
    RecordConversionError,
    RecordDeserializationError,
)
from yak_rest_proxy.schemas.proto_descriptor import file_descriptor
from yak_rest_proxy.schemas.schema_type import SchemaType
from yak_rest_proxy.schemas.wire import encode_message_indexes, frame, read_message_indexes

__all__ = ["ProtobufSerde"]

_WELL_KNOWN = "google/protobuf/"


def _descriptor_proto(text: str, schema_id: int) -> FileDescriptorProto:
    """The schema as a descriptor: base64 ``FileDescriptorProto`` first, else ``.proto``."""
    try:
        return FileDescriptorProto.FromString(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError, DecodeError):
        pass
    try:
        return file_descriptor(text, f"yak-schema-{schema_id}.proto")
    except Exception as exc:  # the ANTLR parser raises bare exceptions
        raise InvalidSchemaError(f"Invalid Protobuf schema {schema_id}: {exc}") from None


def _add_well_known(pool: DescriptorPool, proto: FileDescriptorProto, schema_id: int) -> None:
    for dependency in proto.dependency:
        if not dependency.startswith(_WELL_KNOWN):
            raise InvalidSchemaError(
                f"Protobuf schema {schema_id} imports {dependency!r}: the proxy reads only "
                "self-contained schemas and Google's well-known types"
            )
        module = "google.protobuf." + dependency.removeprefix(_WELL_KNOWN)[:-6] + "_pb2"
        try:
            serialized = importlib.import_module(module).DESCRIPTOR.serialized_pb
        except ImportError:
            raise InvalidSchemaError(f"Protobuf schema {schema_id}: no {dependency!r}") from None
        pool.AddSerializedFile(serialized)


class ProtobufSerde:
    """One registered Protobuf schema's encoder and decoder."""

    __slots__ = ("_file", "_header", "_write_class", "schema_id")
    schema_type: ClassVar[SchemaType] = SchemaType.PROTOBUF

    def __init__(self, schema_id: int, text: str) -> None:
        self.schema_id = schema_id
        proto = _descriptor_proto(text, schema_id)
        pool = DescriptorPool()
        _add_well_known(pool, proto, schema_id)
        try:
            pool.Add(proto)
            self._file: FileDescriptor = pool.FindFileByName(proto.name)
        except (TypeError, ValueError, KeyError) as exc:
            raise InvalidSchemaError(f"Invalid Protobuf schema {schema_id}: {exc}") from None
        messages = list(self._file.message_types_by_name.values())
        if not messages:
            raise InvalidSchemaError(f"Protobuf schema {schema_id} declares no message")
        self._write_class = GetMessageClass(messages[0])
        self._header = frame(schema_id, encode_message_indexes([0]))

    def encode(self, value: Any, where: str) -> bytes:
        """``value`` framed with this schema; ``RecordConversionError`` if it does not fit."""
        if not isinstance(value, dict):
            raise RecordConversionError(
                f"{where}: a Protobuf message is a JSON object, not {type(value).__name__}"
            )
        try:
            message = json_format.ParseDict(value, self._write_class())
        except json_format.ParseError as exc:
            raise RecordConversionError(
                f"{where}: does not match Protobuf schema {self.schema_id}: {exc}"
            ) from None
        return self._header + message.SerializeToString()

    def encode_many(self, values: list[Any], where: Callable[[int], str]) -> list[bytes]:
        """Each of ``values`` framed (``where(i)`` names the i-th in an error)."""
        return [self.encode(value, where(i)) for i, value in enumerate(values)]

    def _message_class(self, indexes: list[int]) -> type[Message]:
        candidates = list(self._file.message_types_by_name.values())
        descriptor: Descriptor | None = None
        for index in indexes:
            if not 0 <= index < len(candidates):
                raise RecordDeserializationError(
                    f"message indexes {indexes} name no message of Protobuf schema {self.schema_id}"
                )
            descriptor = candidates[index]
            candidates = list(descriptor.nested_types)
        assert descriptor is not None  # read_message_indexes never returns []
        return GetMessageClass(descriptor)

    def decode(self, payload: memoryview) -> Any:
        """The JSON value of a payload (message indexes, then the message)."""
        indexes, body = read_message_indexes(payload)
        try:
            message = self._message_class(indexes).FromString(bytes(body))
        except DecodeError as exc:
            raise RecordDeserializationError(
                f"not a message of Protobuf schema {self.schema_id}: {exc}"
            ) from None
        return json_format.MessageToDict(
            message,
            preserving_proto_field_name=True,
            always_print_fields_with_no_presence=True,
        )
