"""Confluent's wire format, checked against Confluent's own serializers' framing."""

from __future__ import annotations

import io
import struct

import pytest
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

from yak_rest_proxy.schemas.wire import (
    NotFramedError,
    encode_message_indexes,
    frame,
    read_message_indexes,
    unframe,
)


def test_frame_is_magic_byte_then_big_endian_id() -> None:
    data = frame(0x01020304, b"payload")
    assert data == b"\x00\x01\x02\x03\x04payload"
    schema_id, rest = unframe(data)
    assert (schema_id, bytes(rest)) == (0x01020304, b"payload")


def test_largest_id_and_empty_payload() -> None:
    schema_id, rest = unframe(struct.pack(">bI", 0, 2**32 - 1))
    assert (schema_id, bytes(rest)) == (2**32 - 1, b"")


@pytest.mark.parametrize("data", [b"", b"\x00\x00\x00\x01", b"\x01\x00\x00\x00\x01x", b'{"a":1}'])
def test_unframed_bytes_are_refused(data: bytes) -> None:
    with pytest.raises(NotFramedError, match="wire format"):
        unframe(data)


def test_first_message_is_one_zero_byte() -> None:
    assert encode_message_indexes([0]) == b"\x00"
    indexes, rest = read_message_indexes(memoryview(b"\x00rest"))
    assert (indexes, bytes(rest)) == ([0], b"rest")


@pytest.mark.parametrize("indexes", [[0], [1], [0, 2], [3, 0, 70], [200]])
def test_message_indexes_match_confluents_writer(indexes: list[int]) -> None:
    ours = encode_message_indexes(indexes)
    confluents = io.BytesIO()
    ProtobufSerializer._encode_varints(confluents, indexes)  # Confluent's own encoder
    assert ours == confluents.getvalue()
    decoded, rest = read_message_indexes(memoryview(ours + b"body"))
    assert (decoded, bytes(rest)) == (indexes, b"body")


@pytest.mark.parametrize("data", [b"", b"\x04\x02", b"\x80"])
def test_cut_indexes_are_refused(data: bytes) -> None:
    with pytest.raises(NotFramedError, match="cut short"):
        read_message_indexes(memoryview(data))
