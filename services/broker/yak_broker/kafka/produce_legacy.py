"""Produce v0-v2 (api key 0): parsed and refused per partition with
``UNSUPPORTED_FOR_MESSAGE_FORMAT``, as Kafka answers a message format it does not take.

These versions carry Kafka's message formats v0/v1, which Yak does not store (it keeps
RecordBatch v2 byte for byte), but clients check that Produce's advertised range starts at 0
(librdkafka derives features from version ranges), so the versions are listed and answered:
every partition of the request gets the error, nothing is appended, acks=0 gets no answer.
kio has no schema below v3, so the three (identical but for the response) are written here:

- request: ``acks int16, timeout_ms int32, topic_data [name string16, partition_data [index
  int32, records bytes32]]`` (arrays: int32 count);
- response: ``responses [name string16, partition_responses [index int32, error_code int16,
  base_offset int64, log_append_time_ms int64 (v2)]], throttle_time_ms int32 (v1+)``.

Pure: no I/O. A malformed body raises ``InvalidRequestError`` (the connection is closed).
"""

from __future__ import annotations

import struct

from yak.errors import InvalidRequestError
from yak.protocol.broker_wire import Buffer
from yak.protocol.kafka_types import I16, I32, Reader
from yak_broker.kafka.schemas import response_frame

__all__ = ["LEGACY_VERSIONS", "refuse_legacy_produce"]

LEGACY_VERSIONS = frozenset({0, 1, 2})
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
_REFUSED = struct.Struct(">ihq")  # index, error_code, base_offset
_NO_TIME = struct.Struct(">q")


def _decode(body: Buffer) -> tuple[int, dict[str, list[int]]]:
    """``acks`` and the partitions named, by topic, in request order."""
    reader = Reader(body, "produce request")
    acks = reader.int16("acks")
    reader.int32("timeout_ms")
    topics: dict[str, list[int]] = {}
    for t in range(_count(reader, "topic_data")):
        name = reader.nullable_string16(f"topic_data[{t}].name")
        if not name:
            raise InvalidRequestError(f"produce request: topic_data[{t}].name is empty")
        for i in range(_count(reader, f"topic_data[{t}].partition_data")):
            where = f"topic_data[{t}].partition_data[{i}]"
            topics.setdefault(name, []).append(reader.int32(f"{where}.index"))
            size = reader.int32(f"{where}.records")
            if size > len(reader.view) - reader.pos:
                raise InvalidRequestError(f"produce request: {where}.records runs past the end")
            reader.pos += max(size, 0)  # -1: null records
    reader.end()
    return acks, topics


def _count(reader: Reader, field: str) -> int:
    count = reader.int32(field)
    if count < 0 or count > len(reader.view) - reader.pos:
        raise InvalidRequestError(f"produce request: {field} claims {count} entries")
    return count


def refuse_legacy_produce(version: int, correlation_id: int, body: Buffer) -> list[Buffer] | None:
    """The answer to a Produce v0-v2: every partition refused (None for acks=0)."""
    acks, topics = _decode(body)
    if acks == 0:
        return None
    out = bytearray(I32.pack(len(topics)))
    for name, partitions in topics.items():
        encoded = name.encode()
        out += I16.pack(len(encoded)) + encoded + I32.pack(len(partitions))
        for index in partitions:
            out += _REFUSED.pack(index, UNSUPPORTED_FOR_MESSAGE_FORMAT, -1)
            if version >= 2:
                out += _NO_TIME.pack(-1)
    if version >= 1:
        out += I32.pack(0)  # throttle_time_ms
    return response_frame(correlation_id, False, bytes(out))
