"""ShareFetch v1 and ShareAcknowledge v1 (KIP-932), checked against kio (Kafka's schemas,
generated from Kafka's own JSON definitions) and round-tripped through our decoders."""

from __future__ import annotations

import contextlib
import datetime
import io
import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.request_header.v2.header import RequestHeader as KioRequestHeader
from kio.schema.response_header.v1.header import ResponseHeader as KioResponseHeader
from kio.schema.share_acknowledge.v1 import request as kio_ack_request
from kio.schema.share_acknowledge.v1 import response as kio_ack_response
from kio.schema.share_fetch.v1 import request as kio_fetch_request
from kio.schema.share_fetch.v1 import response as kio_fetch_response
from kio.serial import entity_reader, entity_writer

from yak.errors import (
    InvalidRecordStateError,
    InvalidRequestError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
)
from yak.protocol import kafka_share as ks
from yak.protocol import kafka_wire as kw
from yak.protocol.broker_wire import Buffer, PartitionError

ORDERS = uuid.UUID("6f1e4a2c-3b5d-4e7f-8a9b-0c1d2e3f4a5b")
AUDIT = uuid.UUID("00000000-0000-4000-8000-00000000beef")


def _joined(parts: list[Buffer]) -> bytes:
    return b"".join(bytes(memoryview(p)) for p in parts)


def _unframe(data: bytes) -> bytes:
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    return data[4:]


def _request_body(parts: list[Buffer]) -> tuple[kw.RequestHeader, memoryview]:
    return kw.decode_request_header(_unframe(_joined(parts)))


def _kio_read(entity: type, data: bytes, offset: int = 0) -> tuple[Any, int]:
    value: Any
    size: int
    value, size = entity_reader(entity)(data, offset)
    return value, offset + size


def _kio_bytes(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def _fetch_request(**changes: Any) -> ks.ShareFetchRequest:
    request = ks.ShareFetchRequest(
        "jobs",
        "worker-1",
        (
            ks.SharePartitionAcks(ORDERS, 0, (ks.AckBatch(10, 14, (1,)),)),
            ks.SharePartitionAcks(ORDERS, 3),
            ks.SharePartitionAcks(AUDIT, 1, (ks.AckBatch(5, 7, (1, 2, 3)),)),
        ),
        max_wait_ms=800,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=250,
        batch_size=100,
    )
    return request._replace(**changes)


def test_share_fetch_request_is_kafkas_share_fetch_v1() -> None:
    body = _unframe(_joined(ks.encode_share_fetch_request(_fetch_request(), 7, "proxy-0")))
    header, used = _kio_read(KioRequestHeader, body)
    assert (header.request_api_key, header.request_api_version) == (78, 1)
    assert (header.correlation_id, header.client_id) == (7, "proxy-0")
    kio, end = _kio_read(kio_fetch_request.ShareFetchRequest, body, used)
    assert end == len(body)
    assert (kio.group_id, kio.member_id, kio.share_session_epoch) == ("jobs", "worker-1", -1)
    assert kio.max_wait == datetime.timedelta(milliseconds=800)
    assert (kio.max_records, kio.batch_size, kio.max_bytes) == (250, 100, 1 << 20)
    assert [
        (
            t.topic_id,
            p.partition_index,
            [
                (b.first_offset, b.last_offset, list(b.acknowledge_types))
                for b in p.acknowledgement_batches
            ],
        )
        for t in kio.topics
        for p in t.partitions
    ] == [
        (ORDERS, 0, [(10, 14, [1])]),
        (ORDERS, 3, []),
        (AUDIT, 1, [(5, 7, [1, 2, 3])]),
    ]
    parsed, rest = kw.decode_request_header(body)
    assert parsed == kw.RequestHeader(78, 1, 7, "proxy-0")
    assert ks.decode_share_fetch_request(rest) == _fetch_request()


def test_share_fetch_request_from_kio_decodes() -> None:
    kio = kio_fetch_request.ShareFetchRequest(
        group_id="g",  # type: ignore[arg-type]
        member_id="m",
        share_session_epoch=0,  # type: ignore[arg-type]
        max_wait=datetime.timedelta(milliseconds=500),  # type: ignore[arg-type]
        min_bytes=1,  # type: ignore[arg-type]
        max_records=10,  # type: ignore[arg-type]
        batch_size=10,  # type: ignore[arg-type]
        topics=(
            kio_fetch_request.FetchTopic(
                topic_id=ORDERS,
                partitions=(
                    kio_fetch_request.FetchPartition(
                        partition_index=2,  # type: ignore[arg-type]
                        acknowledgement_batches=(
                            kio_fetch_request.AcknowledgementBatch(
                                first_offset=0,  # type: ignore[arg-type]
                                last_offset=1,  # type: ignore[arg-type]
                                acknowledge_types=(4,),  # type: ignore[arg-type]
                            ),
                        ),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(
            kio_fetch_request.ForgottenTopic(topic_id=AUDIT, partitions=(5,)),  # type: ignore[arg-type]
        ),
    )
    decoded = ks.decode_share_fetch_request(_kio_bytes(kio))
    assert decoded.partitions == (
        ks.SharePartitionAcks(ORDERS, 2, (ks.AckBatch(0, 1, (ks.AckType.RENEW,)),)),
    )
    assert decoded.forgotten == ((AUDIT, 5),)
    assert (decoded.session_epoch, decoded.max_records, decoded.filter) == (0, 10, None)


def test_the_filter_rides_in_a_tagged_field_kafka_parsers_skip() -> None:
    request = _fetch_request(filter='value.kind == "ünïcode"')
    body = _unframe(_joined(ks.encode_share_fetch_request(request, 1)))
    _, rest = kw.decode_request_header(body)
    assert ks.decode_share_fetch_request(rest).filter == 'value.kind == "ünïcode"'
    # kio refuses unknown tags where Kafka's Java parser keeps them; it names ours.
    _, used = _kio_read(KioRequestHeader, body)
    with pytest.raises(KeyError, match=str(ks.YAK_SHARE_FILTER_TAG)):
        _kio_read(kio_fetch_request.ShareFetchRequest, body, used)


def _fetch_response() -> ks.ShareFetchResponse:
    return ks.ShareFetchResponse(
        (
            ks.ShareFetchedPartition(
                ORDERS,
                0,
                b"batch-bytes",
                (ks.AcquiredRecords(10, 19, 1), ks.AcquiredRecords(25, 25, 3)),
                leader_id=2,
                leader_epoch=7,
            ),
            ks.ShareFetchedPartition(
                ORDERS,
                1,
                error=PartitionError.of(NotLeaderOrFollowerError("broker 1 leads it")),
                leader_id=1,
                leader_epoch=4,
            ),
            ks.ShareFetchedPartition(
                AUDIT,
                0,
                ack_error=PartitionError.of(
                    InvalidRecordStateError("offset 5 is not acquired by worker-1", offset=5)
                ),
                ack_refused=(0, 2, 300),
            ),
        ),
        lock_timeout_ms=30_000,
    )


def test_share_fetch_response_is_kafkas_and_records_are_not_copied() -> None:
    response = _fetch_response()
    parts = ks.encode_share_fetch_response(
        12, response._replace(partitions=response.partitions[:2])
    )
    assert any(part is response.partitions[0].records for part in parts)
    body = _unframe(_joined(parts))
    header, used = _kio_read(KioResponseHeader, body)
    assert header.correlation_id == 12
    kio, end = _kio_read(kio_fetch_response.ShareFetchResponse, body, used)
    assert end == len(body)
    assert kio.acquisition_lock_timeout == datetime.timedelta(seconds=30)
    first, second = kio.responses[0].partitions
    assert kio.responses[0].topic_id == ORDERS
    assert bytes(first.records or b"") == b"batch-bytes"
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in first.acquired_records] == [
        (10, 19, 1),
        (25, 25, 3),
    ]
    assert (first.current_leader.leader_id, first.current_leader.leader_epoch) == (2, 7)
    assert second.error_code == NotLeaderOrFollowerError.kafka_code
    assert second.error_message == "broker 1 leads it"


def test_share_fetch_response_round_trips_with_yak_errors() -> None:
    response = _fetch_response()
    _, rest = kw.decode_response_header(
        _unframe(_joined(ks.encode_share_fetch_response(3, response))), is_flexible=True
    )
    decoded = ks.decode_share_fetch_response(rest)
    assert decoded.lock_timeout_ms == 30_000
    assert [
        (p.topic_id, p.partition, bytes(p.records), p.acquired) for p in decoded.partitions
    ] == [(p.topic_id, p.partition, bytes(p.records), p.acquired) for p in response.partitions]
    assert decoded.partitions[1].error is not None
    assert decoded.partitions[1].error.code == "NOT_LEADER_OR_FOLLOWER"
    ack_error = decoded.partitions[2].ack_error
    assert ack_error is not None
    assert ack_error.code == "INVALID_RECORD_STATE"
    assert dict(ack_error.details) == {"offset": 5}
    assert decoded.partitions[2].ack_refused == (0, 2, 300)
    assert decoded.partitions[0].ack_refused == ()
    assert decoded.partitions[2].error is None


def test_share_acknowledge_request_is_kafkas_share_acknowledge_v1() -> None:
    request = ks.ShareAcknowledgeRequest(
        "jobs",
        "worker-2",
        (ks.SharePartitionAcks(AUDIT, 4, (ks.AckBatch(100, 101, (3, 1)),)),),
    )
    body = _unframe(_joined(ks.encode_share_acknowledge_request(request, 5)))
    header, used = _kio_read(KioRequestHeader, body)
    assert (header.request_api_key, header.request_api_version) == (79, 1)
    kio, end = _kio_read(kio_ack_request.ShareAcknowledgeRequest, body, used)
    assert end == len(body)
    (topic,) = kio.topics
    (partition,) = topic.partitions
    (batch,) = partition.acknowledgement_batches
    assert (topic.topic_id, partition.partition_index) == (AUDIT, 4)
    assert (batch.first_offset, batch.last_offset, batch.acknowledge_types) == (100, 101, (3, 1))
    _, rest = kw.decode_request_header(body)
    assert ks.decode_share_acknowledge_request(rest) == request


def test_share_acknowledge_response_round_trips_and_kio_reads_it() -> None:
    results = (
        ks.AckResult(ORDERS, 0, leader_id=1, leader_epoch=2),
        ks.AckResult(
            ORDERS,
            1,
            PartitionError.of(OffsetOutOfRangeError("below the start", start=40)),
            refused=(1, 129),
        ),
    )
    body = _unframe(_joined(ks.encode_share_acknowledge_response(8, results)))
    _, used = _kio_read(KioResponseHeader, body)
    with pytest.raises(KeyError, match=str(kw.YAK_ERROR_TAG)):  # details ride in Yak's tag
        _kio_read(kio_ack_response.ShareAcknowledgeResponse, body, used)
    plain = _unframe(_joined(ks.encode_share_acknowledge_response(8, results[:1])))
    kio, end = _kio_read(kio_ack_response.ShareAcknowledgeResponse, plain, used)
    assert end == len(plain)
    assert kio.responses[0].partitions[0].current_leader.leader_epoch == 2
    _, rest = kw.decode_response_header(body, is_flexible=True)
    decoded = ks.decode_share_acknowledge_response(rest)
    assert decoded[0] == results[0]
    assert decoded[1].error is not None
    assert (decoded[1].error.code, dict(decoded[1].error.details)) == (
        "OFFSET_OUT_OF_RANGE",
        {"start": 40},
    )
    assert decoded[1].refused == (1, 129)


def test_a_request_level_error_in_an_acknowledge_response_raises() -> None:
    body = _unframe(_joined(ks.encode_share_acknowledge_response(1, (), error_code=69)))
    _, rest = kw.decode_response_header(body, is_flexible=True)
    with pytest.raises(Exception, match="refused") as raised:
        ks.decode_share_acknowledge_response(rest)
    assert raised.value.__class__.__name__ != "InvalidRequestError"


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        (ks.AckBatch(5, 4, (1,)), "first_offset <= last_offset"),
        (ks.AckBatch(-1, 4, (1,)), "first_offset <= last_offset"),
        (ks.AckBatch(0, 3, (1, 1)), "one type or one per offset"),
        (ks.AckBatch(0, 0, (9,)), "acknowledge types are 0-4"),
    ],
)
def test_malformed_acknowledgements_are_refused(batch: ks.AckBatch, message: str) -> None:
    request = ks.ShareAcknowledgeRequest("g", "m", (ks.SharePartitionAcks(ORDERS, 0, (batch,)),))
    _, rest = kw.decode_request_header(
        _unframe(_joined(ks.encode_share_acknowledge_request(request, 1)))
    )
    with pytest.raises(InvalidRequestError, match=message):
        ks.decode_share_acknowledge_request(rest)


def test_a_partition_named_twice_and_empty_names_are_refused() -> None:
    twice = _fetch_request(
        partitions=(ks.SharePartitionAcks(ORDERS, 0), ks.SharePartitionAcks(ORDERS, 0))
    )
    _, rest = _request_body(ks.encode_share_fetch_request(twice, 1))
    with pytest.raises(InvalidRequestError, match="named twice"):
        ks.decode_share_fetch_request(rest)
    nameless = _fetch_request(member_id="")
    _, rest = kw.decode_request_header(
        _unframe(_joined(ks.encode_share_fetch_request(nameless, 1)))
    )
    with pytest.raises(InvalidRequestError, match="non-empty"):
        ks.decode_share_fetch_request(rest)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_decoders_never_fail_other_than_invalid_request(data: bytes) -> None:
    for decode in (
        ks.decode_share_fetch_request,
        ks.decode_share_fetch_response,
        ks.decode_share_acknowledge_request,
    ):
        with contextlib.suppress(InvalidRequestError):
            decode(data)
