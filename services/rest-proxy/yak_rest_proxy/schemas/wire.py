"""Confluent's wire format of schema-framed keys and values: pure functions over bytes.

Byte layout (what Confluent's serializers in every language write and read)::

    offset 0   magic byte 0
    offset 1   schema id, 4 bytes, big-endian, unsigned
    offset 5   PROTOBUF only: the message indexes — the path from the file's top-level
               messages to the record's message, as a count then each index, every number a
               zigzag varint; the common path ``[0]`` (the first message) is one 0 byte
    then       the payload: Avro binary (no container header), UTF-8 JSON, or Protobuf binary

Anything shorter than 5 bytes or with another first byte is not framed: ``unframe`` raises
``NotFramedError``, and a consumer reports the record (``docs/rest-api.md``). No I/O, no state.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

__all__ = [
    "HEADER_BYTES",
    "MAGIC",
    "NotFramedError",
    "encode_message_indexes",
    "frame",
    "read_message_indexes",
    "unframe",
]

MAGIC = 0
HEADER_BYTES = 5
_HEADER = struct.Struct(">bI")
_FIRST_MESSAGE = b"\x00"


class NotFramedError(ValueError):
    """Bytes that are not in Confluent's wire format (or whose indexes are cut short)."""


def frame(schema_id: int, payload: bytes, indexes: bytes = b"") -> bytes:
    """``payload`` framed with ``schema_id`` (and Protobuf's encoded message ``indexes``)."""
    return _HEADER.pack(MAGIC, schema_id) + indexes + payload


def unframe(data: bytes) -> tuple[int, memoryview]:
    """The schema id of framed ``data`` and what follows the 5-byte header."""
    if len(data) < HEADER_BYTES or data[0] != MAGIC:
        raise NotFramedError(
            "not in the schema registry's wire format (magic byte 0 and a 4-byte schema id)"
        )
    _, schema_id = _HEADER.unpack_from(data)
    return schema_id, memoryview(data)[HEADER_BYTES:]


def _zigzag_varint(number: int) -> bytes:
    value = (number << 1) ^ (number >> 63)
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_message_indexes(indexes: Sequence[int]) -> bytes:
    """The message-index prefix of a Protobuf payload; ``[0]`` is the single byte 0."""
    if list(indexes) == [0]:
        return _FIRST_MESSAGE
    return _zigzag_varint(len(indexes)) + b"".join(_zigzag_varint(i) for i in indexes)


def _read_varint(data: memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise NotFramedError("the Protobuf message indexes are cut short")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), at
        shift += 7


def read_message_indexes(data: memoryview) -> tuple[list[int], memoryview]:
    """The message indexes at the start of a Protobuf payload, and the message's bytes."""
    count, at = _read_varint(data, 0)
    if count == 0:
        return [0], data[at:]
    if not 0 < count <= 64:
        raise NotFramedError(f"{count} Protobuf message indexes: not a framed payload")
    indexes = []
    for _ in range(count):
        index, at = _read_varint(data, at)
        indexes.append(index)
    return indexes, data[at:]
