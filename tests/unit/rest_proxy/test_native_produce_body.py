"""The native produce fast path must read exactly what the model path reads, or step aside."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yak.api.records import ProduceRecordsRequest
from yak.errors import InvalidRequestError
from yak.record import RecordInput
from yak.record.record_encoder import encode_record_body
from yak_rest_proxy.api.native.produce_body import fast_outgoing
from yak_rest_proxy.api.native.routes import _outgoing
from yak_rest_proxy.http.body import parse_model
from yak_rest_proxy.produce.accumulator import record_size
from yak_rest_proxy.produce.publish import RequestRecords

NOW = 1_700_000_000_000


def model_path(body: bytes) -> list[tuple[RecordInput, int | None]] | InvalidRequestError:
    try:
        records = _outgoing(parse_model(ProduceRecordsRequest, body))
    except InvalidRequestError as exc:
        return exc
    stamped = []
    for o in records:
        record = o.record
        if record.timestamp is None:  # the producer stamps these when queueing them
            record = record._replace(timestamp=NOW)
        stamped.append((record, o.partition))
    return stamped


def fast_path(body: bytes) -> list[tuple[RecordInput, int | None]] | None:
    records = fast_outgoing(body, NOW)
    return None if records is None else [(o.record, o.partition) for o in records]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
header = st.fixed_dictionaries(
    {"key": st.text(max_size=4) | st.integers()},
    optional={"value": st.none() | st.text(max_size=4) | st.just("aGk="), "x": st.just(1)},
)
record = st.fixed_dictionaries(
    {},
    optional={
        "key": json_values,
        "value": json_values,
        "headers": st.lists(header, max_size=2) | st.none() | st.just("h"),
        "timestamp": st.none() | st.integers(-5, 2**64) | st.just("12") | st.just(True),
        "partition": st.none() | st.integers(-2, 2**32) | st.just(1.5),
        "extra": st.just(0),
    },
)
encodings = st.sampled_from(["string", "json", "base64", "nope", 3, None]) | json_values
body = st.fixed_dictionaries(
    {"records": st.lists(record, max_size=4) | st.just(None)},
    optional={
        "key_encoding": encodings,
        "value_encoding": encodings,
        "header_encoding": st.sampled_from(["string", "base64", "json"]) | json_values,
        "other": st.just(1),
    },
)


@settings(max_examples=400, deadline=None)
@given(body)
def test_the_fast_path_reads_what_the_model_reads_or_steps_aside(data: dict[str, Any]) -> None:
    raw = json.dumps(data).encode()  # json: integers past 64 bits too
    fast = fast_path(raw)
    if fast is not None:
        model = model_path(raw)
        assert fast == model
        assert isinstance(model, list)
        columns = fast_outgoing(raw, NOW)
        assert isinstance(columns, RequestRecords)  # the columns the producer queues:
        assert columns.bodies == [encode_record_body(r.key, r.value, r.headers) for r, _ in model]
        assert columns.sizes == [record_size(r) for r, _ in model]
        assert columns.keys == [r.key for r, _ in model]


def test_the_plain_shape_takes_the_fast_path() -> None:
    raw = orjson.dumps(
        {
            "records": [
                {"key": "k", "value": {"a": [1, 2]}, "headers": [{"key": "h", "value": "v"}]},
                {"value": "plain", "timestamp": 5, "partition": 2},
                {"key": None, "value": None, "headers": []},
            ],
            "value_encoding": "json",
        }
    )
    assert fast_path(raw) == [
        (RecordInput(b"k", b'{"a":[1,2]}', (("h", b"v"),), NOW), None),
        (RecordInput(None, b'"plain"', (), 5), 2),
        (RecordInput(None, None, (), NOW), None),
    ]


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"[]",
        b'{"records": []}',
        b'{"records": [{"value": 1}], "surprise": 1}',
        b'{"records": [{"value": 1, "offset": 3}]}',
        b'{"records": [{"partition": -1}]}',
        b'{"records": [{"headers": null}]}',
        b'{"records": [{"key": 7}]}',
        b'{"records": [{"value": "!!"}], "value_encoding": "base64"}',
        b'{"records": [{"value": 1}], "value_encoding": {}}',
        b'{"records": [{"value": 1}], "key_encoding": ["json"]}',
    ],
)
def test_anything_unusual_goes_to_the_model(raw: bytes) -> None:
    assert fast_path(raw) is None
    assert isinstance(model_path(raw), InvalidRequestError)


def test_a_number_given_as_a_string_goes_to_the_model_which_refuses_it() -> None:
    raw = b'{"records": [{"timestamp": "12"}]}'
    assert fast_path(raw) is None
    refused = model_path(raw)
    assert isinstance(refused, InvalidRequestError)
    assert "records.0.timestamp" in refused.message


@pytest.mark.parametrize("number", [2**64, -(2**63) - 1, 10**30])
def test_an_integer_past_64_bits_takes_the_model_path_and_is_refused(number: int) -> None:
    raw = json.dumps({"records": [{"value": number}]}).encode()
    assert fast_path(raw) is None  # orjson would have read it as a float
    refused = model_path(raw)
    assert isinstance(refused, InvalidRequestError)
    assert "64-bit" in refused.message


@pytest.mark.parametrize(
    "value",
    [
        {"t": "0000006504211752791", "p": "x"},  # 19 digits in a string: a JSON string, no number
        {"id": "12345678901234567890123"},
        ["1234567890123456789012"],
    ],
)
def test_long_digit_runs_inside_strings_keep_the_fast_lane(value: Any) -> None:
    raw = json.dumps({"records": [{"value": value}]}).encode()
    fast = fast_path(raw)
    assert fast is not None
    assert fast == model_path(raw)
