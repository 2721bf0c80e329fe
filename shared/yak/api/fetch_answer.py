"""The binary answer of a consumer-group member's poll (``FETCH_MEDIA_TYPE``).

``GET /api/v1/groups/{g}/members/{m}/records`` with ``Accept: application/vnd.yak.fetch.v1``
answers the record batches the brokers returned, byte for byte as they are stored (Kafka
RecordBatch v2), instead of records rendered as JSON: the proxy reads only batch headers, the
client decodes the records (``yak.record``) and checks their CRC. Byte layout::

    offset  size  field
    0       4     head_length  uint32, big-endian: N
    4       N     head         UTF-8 JSON (below)
    4+N     ...   a Kafka FetchResponse v12 as on Kafka's wire (``yak.protocol.kafka_wire``):
                  int32 size, response header v1 (correlation id 0, no tagged fields), then
                  throttle_time_ms, error_code, session_id, responses [topic, partitions
                  [partition_index, error_code, high_watermark, last_stable_offset,
                  log_start_offset, aborted_transactions, preferred_read_replica, records]]

The head carries what Kafka's fetch has no field for::

    {"member_epoch": 7,
     "assignment": [{"topic": "orders", "partitions": [0, 1]}],
     "fetch_offsets": [{"topic": "orders", "partition": 0, "offset": 1200}]}

``assignment`` is the member's, as in the JSON answer. The FetchResponse holds one entry per
partition that gave records, and ``fetch_offsets`` one per such entry: the position the
partition was read from. Each partition's ``records`` are whole batches in offset order (a
batch cut off at the end of a broker's answer is never included: it comes whole in the next
poll). The first batch may begin below the fetch offset — a fetch answers whole batches from
the one holding the offset, as Kafka's does — and the records below it are skipped by the
client (``iter_records(..., from_offset=...)``), as Kafka's consumers skip them. The member's
position has moved to the end of the last batch (its base offset + lastOffsetDelta + 1).
``error_code`` is always 0: a partition that failed is left out and read again next poll.

``decode_fetch_answer`` raises ``InvalidRequestError`` naming what is malformed; it never
returns a partial answer. Record bytes are not copied by the encoder (separate parts) nor the
decoder (``memoryview`` slices of the body). Pure functions; safe from any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, NamedTuple, TypeGuard

import orjson

from yak.errors import InvalidRequestError
from yak.protocol.broker_wire import Buffer, FetchedPartition
from yak.protocol.kafka_wire import (
    decode_fetch_response,
    decode_response_header,
    encode_fetch_response,
)

__all__ = ["FetchAnswer", "FetchedBatches", "decode_fetch_answer", "encode_fetch_answer"]

_LENGTH = struct.Struct(">I")


class FetchedBatches(NamedTuple):
    """One partition's whole batches of a poll, and the offset it was read from."""

    topic: str
    partition: int
    #: The member's position before the poll: records below it are not handed out.
    fetch_offset: int
    batches: Buffer
    high_watermark: int = -1
    log_start_offset: int = -1


class FetchAnswer(NamedTuple):
    """A decoded binary poll answer: the member's epoch and assignment, and the batches."""

    member_epoch: int
    #: ``(topic, partitions)`` pairs, as in the JSON answer's ``assignment``.
    assignment: tuple[tuple[str, tuple[int, ...]], ...]
    partitions: tuple[FetchedBatches, ...]


def encode_fetch_answer(
    member_epoch: int,
    assignment: Sequence[tuple[str, Sequence[int]]],
    partitions: Sequence[FetchedBatches],
) -> list[Buffer]:
    """The answer as parts to write in order (record bytes uncopied)."""
    head = orjson.dumps(
        {
            "member_epoch": member_epoch,
            "assignment": [{"topic": t, "partitions": list(ps)} for t, ps in assignment],
            "fetch_offsets": [
                {"topic": p.topic, "partition": p.partition, "offset": p.fetch_offset}
                for p in partitions
            ],
        }
    )
    fetched = [
        FetchedPartition(
            p.topic,
            p.partition,
            p.high_watermark,
            p.high_watermark,
            p.log_start_offset,
            p.batches,
        )
        for p in partitions
    ]
    return [_LENGTH.pack(len(head)) + head, *encode_fetch_response(0, fetched)]


def decode_fetch_answer(body: Buffer) -> FetchAnswer:
    """The answer ``encode_fetch_answer`` wrote (see the module docstring)."""
    view = memoryview(body)
    if len(view) < _LENGTH.size:
        raise InvalidRequestError(f"fetch answer: {len(view)} bytes, shorter than its head length")
    (length,) = _LENGTH.unpack_from(view)
    frame_at = _LENGTH.size + length
    if frame_at + 4 > len(view):
        raise InvalidRequestError(f"fetch answer: a head of {length} bytes runs past the end")
    try:
        head = orjson.loads(view[_LENGTH.size : frame_at])
    except orjson.JSONDecodeError:
        raise InvalidRequestError("fetch answer: the head is not JSON") from None
    (size,) = struct.unpack_from(">i", view, frame_at)
    frame = view[frame_at + 4 :]
    if size != len(frame):
        raise InvalidRequestError(
            f"fetch answer: the fetch response declares {size} bytes, {len(frame)} follow"
        )
    header, rest = decode_response_header(frame, is_flexible=True)
    if header.error is not None:
        raise header.error
    epoch, assignment, offsets = _head(head)
    partitions = []
    for fetched in decode_fetch_response(rest):
        key = (fetched.topic, fetched.partition)
        offset = offsets.pop(key, None)
        if offset is None:
            raise InvalidRequestError(f"fetch answer: {key[0]}-{key[1]} has no fetch offset")
        partitions.append(
            FetchedBatches(
                fetched.topic,
                fetched.partition,
                offset,
                fetched.records,
                fetched.high_watermark,
                fetched.log_start_offset,
            )
        )
    if offsets:
        topic, partition = next(iter(offsets))
        raise InvalidRequestError(f"fetch answer: {topic}-{partition} has an offset, no records")
    return FetchAnswer(epoch, assignment, tuple(partitions))


def _head(
    head: Any,
) -> tuple[int, tuple[tuple[str, tuple[int, ...]], ...], dict[tuple[str, int], int]]:
    if not isinstance(head, dict):
        raise InvalidRequestError("fetch answer: the head is not a JSON object")
    epoch = head.get("member_epoch")
    if not _is_int(epoch):
        raise InvalidRequestError("fetch answer: member_epoch is not an integer")
    assignment = []
    for entry in _list(head, "assignment"):
        topic, partitions = entry.get("topic"), entry.get("partitions")
        if not isinstance(topic, str) or not isinstance(partitions, list):
            raise InvalidRequestError("fetch answer: an assignment entry is malformed")
        if not all(_is_int(p) for p in partitions):
            raise InvalidRequestError(f"fetch answer: assignment of {topic!r} is malformed")
        assignment.append((topic, tuple(partitions)))
    offsets: dict[tuple[str, int], int] = {}
    for entry in _list(head, "fetch_offsets"):
        topic, partition, offset = entry.get("topic"), entry.get("partition"), entry.get("offset")
        if not isinstance(topic, str) or not _is_int(partition) or not _is_int(offset):
            raise InvalidRequestError("fetch answer: a fetch_offsets entry is malformed")
        offsets[(topic, partition)] = offset
    return epoch, tuple(assignment), offsets


def _list(head: dict[str, Any], name: str) -> list[dict[str, Any]]:
    value = head.get(name)
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise InvalidRequestError(f"fetch answer: {name} is not a list of objects")
    return value


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
