"""The internal plane's Kafka messages, checked against kio (Kafka's schemas, generated from
Kafka's own JSON message definitions) and round-tripped through our decoders."""

from __future__ import annotations

import contextlib
import datetime
import io
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchRequest as KioFetchRequest
from kio.schema.fetch.v12.response import FetchableTopicResponse, PartitionData
from kio.schema.fetch.v12.response import FetchResponse as KioFetchResponse
from kio.schema.produce.v9.request import PartitionProduceData, TopicProduceData
from kio.schema.produce.v9.request import ProduceRequest as KioProduceRequest
from kio.schema.produce.v9.response import PartitionProduceResponse, TopicProduceResponse
from kio.schema.produce.v9.response import ProduceResponse as KioProduceResponse
from kio.schema.request_header.v2.header import RequestHeader as KioRequestHeader
from kio.schema.response_header.v1.header import ResponseHeader as KioResponseHeader
from kio.serial import entity_reader, entity_writer

from yak.errors import (
    InvalidRequestError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    YakError,
)
from yak.protocol import kafka_sasl as sasl
from yak.protocol import kafka_wire as kw
from yak.protocol.broker_wire import (
    Buffer,
    FetchedPartition,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    PartitionError,
    ProducePartition,
    ProduceRequest,
    ProduceResult,
)


def _joined(parts: list[Buffer]) -> bytes:
    return b"".join(bytes(memoryview(p)) for p in parts)


def _unframe(data: bytes) -> bytes:
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    return data[4:]


def _kio_read(entity: type, data: bytes, offset: int = 0) -> tuple[object, int]:
    """kio's entity and the offset just past it."""
    value: object
    size: int
    value, size = entity_reader(entity)(data, offset)
    return value, offset + size


def _kio_bytes(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def test_produce_request_is_kafkas_produce_v9() -> None:
    request = ProduceRequest(
        (
            ProducePartition("orders", 0, b"batch-zero"),
            ProducePartition("orders", 3, b"batch-three"),
            ProducePartition("audit", 1, b"x" * 300),
        ),
        acks=-1,
        timeout_ms=1500,
    )
    body = _unframe(_joined(kw.encode_produce_request(request, 42, "proxy-1")))
    header, used = _kio_read(KioRequestHeader, body)
    assert isinstance(header, KioRequestHeader)
    assert (header.request_api_key, header.request_api_version) == (0, 9)
    assert (header.correlation_id, header.client_id) == (42, "proxy-1")
    kio_request, end = _kio_read(KioProduceRequest, body, used)
    assert end == len(body)
    assert isinstance(kio_request, KioProduceRequest)
    assert kio_request.acks == -1
    assert kio_request.timeout == datetime.timedelta(milliseconds=1500)
    assert [
        (t.name, p.index, bytes(p.records or b""))
        for t in kio_request.topic_data
        for p in t.partition_data
    ] == [("orders", 0, b"batch-zero"), ("orders", 3, b"batch-three"), ("audit", 1, b"x" * 300)]
    parsed, rest = kw.decode_request_header(body)
    assert parsed == kw.RequestHeader(0, 9, 42, "proxy-1")
    decoded = kw.decode_produce_request(rest)
    assert decoded.acks == -1
    assert decoded.timeout_ms == 1500
    assert [(p.topic, p.partition, bytes(p.records)) for p in decoded.partitions] == [
        (p.topic, p.partition, bytes(p.records)) for p in request.partitions
    ]


def test_produce_request_from_kio_decodes() -> None:
    kio_request = KioProduceRequest(
        acks=1,  # type: ignore[arg-type]
        timeout=datetime.timedelta(seconds=3),  # type: ignore[arg-type]
        topic_data=(
            TopicProduceData(
                name="t",  # type: ignore[arg-type]
                partition_data=(PartitionProduceData(index=2, records=b"abc"),),  # type: ignore[arg-type]
            ),
        ),
    )
    decoded = kw.decode_produce_request(_kio_bytes(kio_request))
    assert decoded.acks == 1
    assert decoded.timeout_ms == 3000
    assert [(p.topic, p.partition, bytes(p.records)) for p in decoded.partitions] == [
        ("t", 2, b"abc")
    ]


def test_produce_response_is_kafkas_and_keeps_yak_errors() -> None:
    results = [
        ProduceResult("orders", 0, base_offset=10, log_start_offset=0),
        ProduceResult(
            "orders",
            1,
            error=PartitionError.of(OutOfOrderSequenceError("gap", expected_sequence=7)),
        ),
    ]
    body = _unframe(_joined(kw.encode_produce_response(9, results)))
    # Kafka's Java parser keeps unknown tagged fields; kio refuses them: it reads the
    # response without Yak's tag (an error without details), and names our tag otherwise.
    with pytest.raises(KeyError, match=str(kw.YAK_ERROR_TAG)):
        _kio_read(KioProduceResponse, body, _kio_read(KioResponseHeader, body)[1])
    plain = [
        *results[:1],
        ProduceResult("orders", 1, error=PartitionError("NOT_LEADER_OR_FOLLOWER", "moved")),
    ]
    kio_body = _unframe(_joined(kw.encode_produce_response(9, plain)))
    header, used = _kio_read(KioResponseHeader, kio_body)
    assert isinstance(header, KioResponseHeader)
    assert header.correlation_id == 9
    kio_response, end = _kio_read(KioProduceResponse, kio_body, used)
    assert end == len(kio_body)
    assert isinstance(kio_response, KioProduceResponse)
    (topic,) = kio_response.responses
    assert [(p.index, p.error_code.value, p.base_offset) for p in topic.partition_responses] == [
        (0, 0, 10),
        (1, 6, -1),
    ]
    assert topic.partition_responses[1].error_message == "moved"
    parsed, rest = kw.decode_response_header(body, is_flexible=True)
    assert parsed.correlation_id == 9
    assert parsed.error is None
    decoded = kw.decode_produce_response(rest)
    assert decoded[0] == results[0]
    error = decoded[1].error
    assert error is not None
    exc = error.exception()
    assert isinstance(exc, OutOfOrderSequenceError)
    assert exc.details == {"expected_sequence": 7}


def test_produce_response_from_kio_maps_kafka_codes() -> None:
    kio_response = KioProduceResponse(
        responses=(
            TopicProduceResponse(
                name="t",  # type: ignore[arg-type]
                partition_responses=(
                    PartitionProduceResponse(
                        index=0,  # type: ignore[arg-type]
                        error_code=ErrorCode(6),
                        base_offset=-1,  # type: ignore[arg-type]
                        record_errors=(),
                        error_message="moved",
                    ),
                ),
            ),
        ),
        throttle_time=datetime.timedelta(0),  # type: ignore[arg-type]
    )
    (result,) = kw.decode_produce_response(_kio_bytes(kio_response))
    assert result.error is not None
    assert isinstance(result.error.exception(), NotLeaderOrFollowerError)
    assert result.error.message == "moved"


def test_fetch_request_is_kafkas_fetch_v12() -> None:
    request = FetchRequest(
        (FetchPartition("a", 0, 5, 1000, 3), FetchPartition("b", 2, 0, 2000, -1)),
        max_wait_ms=250,
        min_bytes=1,
        max_bytes=4096,
        replica_id=2,
    )
    body = _unframe(_joined(kw.encode_fetch_request(request, 7)))
    _, used = _kio_read(KioRequestHeader, body)
    kio_request, end = _kio_read(KioFetchRequest, body, used)
    assert end == len(body)
    assert isinstance(kio_request, KioFetchRequest)
    assert kio_request.replica_id == 2
    assert kio_request.max_wait == datetime.timedelta(milliseconds=250)
    assert [
        (t.topic, p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch)
        for t in kio_request.topics
        for p in t.partitions
    ] == [("a", 0, 5, 1000, 3), ("b", 2, 0, 2000, -1)]
    _, rest = kw.decode_request_header(body)
    assert kw.decode_fetch_request(rest) == request


def test_a_followers_log_dir_id_rides_in_a_top_level_tagged_field() -> None:
    """Empty-disk restarts (KIP-903): the follower's data folder id, a tag only followers send
    to Yak leaders (an older Yak leader skips it); none without an id, as Kafka's own."""
    request = FetchRequest((FetchPartition("a", 0, 5),), replica_id=2, replica_log_dir_id="ab12")
    body = _unframe(_joined(kw.encode_fetch_request(request, 7)))
    assert body.endswith(b"\x01\xe2\xf2\x01\x04ab12")  # 1 tag: 0x7962 (uvarint), 4 bytes
    _, rest = kw.decode_request_header(body)
    assert kw.decode_fetch_request(rest) == request
    plain = request._replace(replica_log_dir_id="")
    assert _unframe(_joined(kw.encode_fetch_request(plain, 7))).endswith(b"\x01\x00")


def test_fetch_session_fields_are_kafkas() -> None:
    """KIP-227: session id and epoch, forgotten topics; an incremental fetch may name none."""
    request = FetchRequest(
        (),
        replica_id=1,
        session_id=4242,
        session_epoch=7,
        forgotten=(("a", 0), ("b", 3), ("a", 2)),
    )
    body = _unframe(_joined(kw.encode_fetch_request(request, 9)))
    _, used = _kio_read(KioRequestHeader, body)
    kio_request, end = _kio_read(KioFetchRequest, body, used)
    assert end == len(body)
    assert isinstance(kio_request, KioFetchRequest)
    assert (kio_request.session_id, kio_request.session_epoch) == (4242, 7)
    assert [(f.topic, list(f.partitions)) for f in kio_request.forgotten_topics_data] == [
        ("a", [0, 2]),
        ("b", [3]),
    ]
    _, rest = kw.decode_request_header(body)
    decoded = kw.decode_fetch_request(rest)
    assert decoded == request._replace(forgotten=(("a", 0), ("a", 2), ("b", 3)))
    sessionless = FetchRequest((), replica_id=1)
    _, rest = kw.decode_request_header(_unframe(_joined(kw.encode_fetch_request(sessionless, 1))))
    with pytest.raises(InvalidRequestError, match="non-empty"):
        kw.decode_fetch_request(rest)


def test_fetch_response_carries_the_session_and_its_error() -> None:
    body = _unframe(_joined(kw.encode_fetch_response(3, [], session_id=99, error_code=71)))
    _, used = _kio_read(KioResponseHeader, body)
    kio_response, end = _kio_read(KioFetchResponse, body, used)
    assert end == len(body)
    assert isinstance(kio_response, KioFetchResponse)
    assert (kio_response.session_id, kio_response.error_code.value) == (99, 71)
    _, rest = kw.decode_response_header(body, is_flexible=True)
    assert kw.decode_fetch_session_response(rest) == FetchResponse((), 99, 71)
    with pytest.raises(YakError):
        kw.decode_fetch_response(rest)  # the sessionless reader raises it


def test_fetch_response_is_kafkas_and_records_are_not_copied() -> None:
    records = b"R" * 70_000
    partitions = [
        FetchedPartition("a", 0, 100, 100, 0, records),
        FetchedPartition(
            "a",
            1,
            error=PartitionError.of(
                OffsetOutOfRangeError("too far", log_start_offset=3, log_end_offset=9)
            ),
        ),
        FetchedPartition("b", 4, 7, 7, 2, b""),
    ]
    parts = kw.encode_fetch_response(11, partitions)
    assert any(part is records for part in parts)  # written as it is, not copied
    body = _unframe(_joined(parts))
    plain = [
        *partitions[:1],
        partitions[1]._replace(error=PartitionError("OFFSET_OUT_OF_RANGE", "x")),
        partitions[2],
    ]
    kio_body = _unframe(_joined(kw.encode_fetch_response(11, plain)))
    _, used = _kio_read(KioResponseHeader, kio_body)
    kio_response, end = _kio_read(KioFetchResponse, kio_body, used)
    assert end == len(kio_body)
    assert isinstance(kio_response, KioFetchResponse)
    flat = [(t.topic, p) for t in kio_response.responses for p in t.partitions]
    assert [
        (topic, p.partition_index, p.error_code.value, p.high_watermark) for topic, p in flat
    ] == [
        ("a", 0, 0, 100),
        ("a", 1, 1, -1),
        ("b", 4, 0, 7),
    ]
    assert bytes(flat[0][1].records or b"") == records
    _, rest = kw.decode_response_header(body, is_flexible=True)
    decoded = kw.decode_fetch_response(rest)
    assert bytes(decoded[0].records) == records
    assert decoded[0]._replace(records=b"") == partitions[0]._replace(records=b"")
    error = decoded[1].error
    assert error is not None
    exc = error.exception()
    assert isinstance(exc, OffsetOutOfRangeError)
    assert exc.details == {"log_start_offset": 3, "log_end_offset": 9}
    assert decoded[2] == partitions[2]._replace(records=decoded[2].records)


def test_fetch_response_from_kio_decodes() -> None:
    kio_response = KioFetchResponse(
        throttle_time=datetime.timedelta(0),  # type: ignore[arg-type]
        error_code=ErrorCode(0),
        responses=(
            FetchableTopicResponse(
                topic="t",  # type: ignore[arg-type]
                partitions=(
                    PartitionData(
                        partition_index=1,  # type: ignore[arg-type]
                        error_code=ErrorCode(0),
                        high_watermark=5,  # type: ignore[arg-type]
                        aborted_transactions=None,
                        records=b"xyz",  # type: ignore[arg-type]
                    ),
                ),
            ),
        ),
    )
    (partition,) = kw.decode_fetch_response(_kio_bytes(kio_response))
    assert (partition.topic, partition.partition, partition.high_watermark) == ("t", 1, 5)
    assert bytes(partition.records) == b"xyz"
    assert partition.error is None


def test_request_level_error_rides_in_the_response_header() -> None:
    body = _unframe(_joined(kw.error_response(5, MessageTooLargeError("big", limit=10))))
    header, rest = kw.decode_response_header(body, is_flexible=True)
    assert header.correlation_id == 5
    assert not rest
    assert isinstance(header.error, MessageTooLargeError)
    assert header.error.details == {"limit": 10}


def test_sasl_messages_round_trip() -> None:
    body = _unframe(_joined(sasl.encode_sasl_handshake_request("PLAIN", 1)))
    header, rest = kw.decode_request_header(body)
    assert header.api_key == kw.API_SASL_HANDSHAKE
    assert sasl.decode_sasl_handshake_request(rest) == "PLAIN"
    body = _unframe(_joined(sasl.encode_sasl_handshake_response(1, 0, ["PLAIN"])))
    _, rest = kw.decode_response_header(body, is_flexible=False)
    assert sasl.decode_sasl_handshake_response(rest) == (0, ["PLAIN"])
    body = _unframe(_joined(sasl.encode_sasl_authenticate_request(b"\x00a\x00b", 2)))
    _, rest = kw.decode_request_header(body)
    assert sasl.decode_sasl_authenticate_request(rest) == b"\x00a\x00b"
    body = _unframe(_joined(sasl.encode_sasl_authenticate_response(2, 58, "no")))
    _, rest = kw.decode_response_header(body, is_flexible=True)
    assert sasl.decode_sasl_authenticate_response(rest) == (58, "no")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b[:-3], "runs past the end|not a valid varint"),
        (lambda b: b + b"\x00", "left over"),
    ],
)
def test_malformed_produce_requests_are_refused(mutate, message) -> None:
    request = ProduceRequest((ProducePartition("t", 0, b"abc"),), acks=1)
    _, rest = kw.decode_request_header(_unframe(_joined(kw.encode_produce_request(request, 1))))
    with pytest.raises(InvalidRequestError, match=message):
        kw.decode_produce_request(mutate(bytes(rest)))


def test_bad_acks_and_duplicate_partitions_are_refused() -> None:
    request = ProduceRequest(
        (ProducePartition("t", 0, b"a"), ProducePartition("t", 0, b"b")), acks=1
    )
    _, rest = kw.decode_request_header(_unframe(_joined(kw.encode_produce_request(request, 1))))
    with pytest.raises(InvalidRequestError, match="appears twice"):
        kw.decode_produce_request(rest)
    request = ProduceRequest((ProducePartition("t", 0, b"a"),), acks=2)
    _, rest = kw.decode_request_header(_unframe(_joined(kw.encode_produce_request(request, 1))))
    with pytest.raises(InvalidRequestError, match="acks must be"):
        kw.decode_produce_request(rest)


@given(st.binary(max_size=200))
def test_decoders_never_fail_other_than_invalid_request(data: bytes) -> None:
    for decode in (
        kw.decode_produce_request,
        kw.decode_fetch_request,
        kw.decode_produce_response,
        kw.decode_fetch_response,
    ):
        # A Yak error (InvalidRequestError, or the typed error of a Kafka code in the data)
        # is the only way a decoder may fail: never an IndexError, struct.error ...
        with contextlib.suppress(YakError):
            decode(data)


@settings(deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=20_000), min_size=1, max_size=8),
    st.lists(st.integers(min_value=1, max_value=100_000), min_size=1, max_size=20),
)
def test_frame_splitter_reassembles_any_chunking(sizes: list[int], reads: list[int]) -> None:
    payloads = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    stream = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    splitter = kw.FrameSplitter(scratch_bytes=4096, direct_bytes=1024)
    got: list[bytes] = []
    position, turn = 0, 0
    while position < len(stream):
        target = splitter.buffer()
        count = min(len(target), reads[turn % len(reads)], len(stream) - position)
        target[:count] = stream[position : position + count]
        position += count
        turn += 1
        got.extend(bytes(memoryview(f)) for f in splitter.filled(count))
    assert got == payloads


def test_frame_splitter_refuses_oversized_frames() -> None:
    splitter = kw.FrameSplitter(max_bytes=100)
    target = splitter.buffer()
    target[:4] = struct.pack(">i", 101)
    with pytest.raises(kw.FrameTooLargeError):
        splitter.filled(4)
