"""The binary poll answer (``yak.api.fetch_answer``): a round trip, its FetchResponse read by
the Kafka codec on its own, and every malformed answer refused whole."""

from __future__ import annotations

import struct

import orjson
import pytest

from yak.api.fetch_answer import (
    FetchAnswer,
    FetchedBatches,
    decode_fetch_answer,
    encode_fetch_answer,
)
from yak.errors import InvalidRequestError
from yak.protocol.kafka_wire import decode_fetch_response, decode_response_header
from yak.record import RecordInput, encode_batch, iter_records

BATCH_A = encode_batch([RecordInput(b"k", b"v0"), RecordInput(None, b"v1")], base_offset=10)
BATCH_B = encode_batch([RecordInput(b"x", None, (("h", b"\x00"),))], base_offset=12)
PARTITIONS = [
    FetchedBatches("orders", 0, 11, BATCH_A + BATCH_B, 20, 0),
    FetchedBatches("orders", 3, 5, encode_batch([RecordInput(None, b"z")], base_offset=5), 6, 1),
    FetchedBatches("audit", 1, 0, encode_batch([RecordInput(None, b"a")]), 1, 0),
]
ASSIGNMENT = [("audit", [1]), ("orders", [0, 3, 4])]


def body() -> bytes:
    return b"".join(encode_fetch_answer(7, ASSIGNMENT, PARTITIONS))


def test_a_round_trip() -> None:
    answer = decode_fetch_answer(body())
    assert (answer.member_epoch, answer.assignment) == (7, (("audit", (1,)), ("orders", (0, 3, 4))))
    assert len(answer.partitions) == len(PARTITIONS)
    by_tp = {(p.topic, p.partition): p for p in answer.partitions}
    for sent in PARTITIONS:
        got = by_tp[(sent.topic, sent.partition)]
        assert (got.fetch_offset, got.high_watermark, got.log_start_offset) == (
            sent.fetch_offset,
            sent.high_watermark,
            sent.log_start_offset,
        )
        assert bytes(got.batches) == sent.batches  # byte for byte, as the broker stored them
    records = list(iter_records(bytes(by_tp[("orders", 0)].batches), from_offset=11))
    assert [(r.offset, r.key, r.value) for r in records] == [(11, None, b"v1"), (12, b"x", None)]


def test_the_fetch_response_is_kafkas_own() -> None:
    data = body()
    (length,) = struct.unpack_from(">I", data)
    head = orjson.loads(data[4 : 4 + length])
    assert head["member_epoch"] == 7
    frame = data[4 + length :]
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    header, rest = decode_response_header(frame[4:], is_flexible=True)
    assert header == (0, None)
    fetched = decode_fetch_response(rest)
    assert {(p.topic, p.partition, p.error) for p in fetched} == {
        ("orders", 0, None),
        ("orders", 3, None),
        ("audit", 1, None),
    }


def test_an_empty_answer() -> None:
    answer = decode_fetch_answer(b"".join(encode_fetch_answer(2, [], [])))
    assert answer == FetchAnswer(2, (), ())


def _with_head(head: object) -> bytes:
    data = body()
    (length,) = struct.unpack_from(">I", data)
    new = orjson.dumps(head)
    return struct.pack(">I", len(new)) + new + data[4 + length :]


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "shorter than its head length"),
        (struct.pack(">I", 99) + b"{}", "runs past the end"),
        (body()[:-3], "declares"),
        (body() + b"\x00", "declares"),
        (_with_head([1]), "not a JSON object"),
        (_with_head({"member_epoch": "7", "assignment": [], "fetch_offsets": []}), "member_epoch"),
        (_with_head({"member_epoch": 7, "assignment": [{"topic": "t"}], "fetch_offsets": []}),
         "assignment"),
        (_with_head({"member_epoch": 7, "assignment": [], "fetch_offsets": []}),
         "has no fetch offset"),
        (_with_head({"member_epoch": 7, "assignment": [], "fetch_offsets": [
            {"topic": p.topic, "partition": p.partition, "offset": p.fetch_offset}
            for p in [*PARTITIONS, FetchedBatches("x", 0, 0, b"")]
        ]}), "has an offset, no records"),
    ],
)  # fmt: skip
def test_a_malformed_answer_is_refused(data: bytes, match: str) -> None:
    with pytest.raises(InvalidRequestError, match=match):
        decode_fetch_answer(data)
