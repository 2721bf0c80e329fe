"""Tests for yak.protocol.broker_wire: frames round-trip, slices are views, bad input is typed."""

from __future__ import annotations

import struct

import orjson
import pytest

from yak.errors import InvalidRequestError, NotLeaderOrFollowerError
from yak.protocol.broker_wire import (
    FRAME_MAGIC,
    MAX_HEADER_BYTES,
    FetchedPartition,
    FetchPartition,
    FetchRequest,
    PartitionError,
    ProducePartition,
    ProduceRequest,
    ProduceResult,
    decode_fetch_request,
    decode_fetch_response,
    decode_produce_request,
    decode_produce_response,
    encode_fetch_request,
    encode_fetch_response,
    encode_produce_request,
    encode_produce_response,
    fetch_response_parts,
)


def frame(header: object, payload: bytes = b"") -> bytes:
    raw = orjson.dumps(header)
    return FRAME_MAGIC + struct.pack(">I", len(raw)) + raw + payload


def test_produce_request_round_trip_without_copies() -> None:
    request = ProduceRequest(
        (ProducePartition("a", 0, b"\x01" * 100), ProducePartition("b", 3, b"\x02" * 7)),
        acks=-1,
        timeout_ms=1500,
    )
    body = encode_produce_request(request)
    decoded = decode_produce_request(body)
    assert (decoded.acks, decoded.timeout_ms) == (-1, 1500)
    assert [(p.topic, p.partition, bytes(p.records)) for p in decoded.partitions] == [
        ("a", 0, b"\x01" * 100),
        ("b", 3, b"\x02" * 7),
    ]
    first = decoded.partitions[0].records
    assert isinstance(first, memoryview)
    assert first.obj is body  # a view of the body, not a copy


def test_produce_response_round_trip() -> None:
    error = PartitionError("NOT_LEADER_OR_FOLLOWER", "led elsewhere", {"leader": 2})
    results = (ProduceResult("a", 0, 10, -1, 0), ProduceResult("a", 1, error=error))
    decoded = decode_produce_response(encode_produce_response(results))
    assert decoded == results
    raised = decoded[1].error.exception() if decoded[1].error else None
    assert isinstance(raised, NotLeaderOrFollowerError)
    assert raised.details == {"leader": 2}


def test_fetch_request_round_trip_and_defaults() -> None:
    request = FetchRequest((FetchPartition("t", 1, 42, 4096),), 250, 10, 8192, 3)
    assert decode_fetch_request(encode_fetch_request(request)) == request
    minimal = decode_fetch_request(b'{"partitions": [{"topic": "t", "partition": 0, "offset": 0}]}')
    assert minimal == FetchRequest((FetchPartition("t", 0, 0),))
    follower = request._replace(replica_log_dir_id="0123456789abcdef")
    assert decode_fetch_request(encode_fetch_request(follower)) == follower


def test_fetch_response_round_trip() -> None:
    partitions = [
        FetchedPartition("t", 0, 5, 5, 0, b"abc"),
        FetchedPartition("t", 1, error=PartitionError("OFFSET_OUT_OF_RANGE", "too far")),
        FetchedPartition("u", 0, 9, 9, 2, b"defgh"),
    ]
    body = encode_fetch_response(partitions)
    assert b"".join(bytes(part) for part in fetch_response_parts(partitions)) == body
    decoded = decode_fetch_response(body)
    assert [bytes(p.records) for p in decoded] == [b"abc", b"", b"defgh"]
    assert decoded[1].error == PartitionError("OFFSET_OUT_OF_RANGE", "too far")
    assert (decoded[2].high_watermark, decoded[2].log_start_offset) == (9, 2)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"YKF", "shorter than its 8-byte prefix"),
        (b"NOPE" + struct.pack(">I", 2) + b"{}", "bad frame magic"),
        (FRAME_MAGIC + struct.pack(">I", 100) + b"{}", "does not fit"),
        (FRAME_MAGIC + struct.pack(">I", MAX_HEADER_BYTES + 1) + b"{}", "does not fit"),
        (FRAME_MAGIC + struct.pack(">I", 3) + b"{x}", "not valid JSON"),
        (frame([1, 2]), "must be a JSON object"),
        (frame({"acks": 1}), "partitions must be a non-empty list"),
        (frame({"acks": 1, "partitions": []}), "partitions must be a non-empty list"),
        (frame({"acks": 5, "partitions": []}), "acks must be 0, 1 or -1"),
        (frame({"acks": True, "partitions": []}), "acks must be an integer"),
        (frame({"acks": 1, "partitions": [7]}), "partitions[0] must be an object"),
        (
            frame({"acks": 1, "partitions": [{"topic": "t", "partition": 0, "size": 5}]}, b"abc"),
            "runs past",
        ),
        (
            frame({"acks": 1, "partitions": [{"topic": "t", "partition": 0, "size": 1}]}, b"abc"),
            "sizes add up to 1 bytes but the payload has 3",
        ),
        (
            frame({"acks": 1, "partitions": [{"topic": "", "partition": 0, "size": 0}]}),
            "topic must be a non-empty string",
        ),
        (
            frame({"acks": 1, "partitions": [{"topic": "t", "partition": -1, "size": 0}]}),
            "partition must be >= 0",
        ),
        (
            frame(
                {
                    "acks": 1,
                    "partitions": [
                        {"topic": "t", "partition": 0, "size": 1},
                        {"topic": "t", "partition": 0, "size": 1},
                    ],
                },
                b"ab",
            ),
            "appears twice",
        ),
    ],
)
def test_malformed_produce_requests_raise_invalid_request(body: bytes, fragment: str) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        decode_produce_request(body)
    assert fragment in raised.value.message


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"[]", "must be a JSON object"),
        (b"{", "not valid JSON"),
        (b'{"partitions": [{"topic": "t", "partition": 0}]}', "offset must be an integer"),
        (b'{"partitions": [{"topic": "t", "partition": 0, "offset": -1}]}', "offset must be >= 0"),
        (
            b'{"max_wait_ms": -5, "partitions": [{"topic": "t", "partition": 0, "offset": 0}]}',
            "max_wait_ms must be >= 0",
        ),
        (
            b'{"partitions": [{"topic": "t", "partition": 0, "offset": 0, "max_bytes": 0}]}',
            "max_bytes must be >= 1",
        ),
    ],
)
def test_malformed_fetch_requests_raise_invalid_request(body: bytes, fragment: str) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        decode_fetch_request(body)
    assert fragment in raised.value.message


def test_a_fetch_response_with_a_bad_error_field_is_refused() -> None:
    entry = {
        "topic": "t",
        "partition": 0,
        "high_watermark": 0,
        "last_stable_offset": 0,
        "log_start_offset": 0,
        "error": "boom",
        "size": 0,
    }
    with pytest.raises(InvalidRequestError, match="error must be null or an object"):
        decode_fetch_response(frame({"partitions": [entry]}))
