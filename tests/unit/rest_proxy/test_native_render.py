"""The dict renderer of the consume path gives exactly ``ConsumedRecord``'s JSON."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yak.api.records import ConsumedRecord, Encoding, HeaderEncoding, RecordHeader, decode_data
from yak.record import Record
from yak_rest_proxy.api.native.render import partition_renderer, renderer

data = st.none() | st.binary(max_size=12) | st.sampled_from([b'{"a":[1,2.5,null]}', b'"s"', b"7"])
records = st.builds(
    Record,
    offset=st.integers(0, 2**63 - 1),
    timestamp=st.integers(-1, 2**63 - 1),
    key=data,
    value=data,
    headers=st.lists(st.tuples(st.text(max_size=4), data), max_size=3).map(tuple),
)


def model_json(record: Record, key: Encoding, value: Encoding, header: HeaderEncoding) -> object:
    """What the route answered when it built a ``ConsumedRecord`` per record."""
    as_string = header is HeaderEncoding.STRING
    headers = [
        RecordHeader(
            key=k,
            value=None
            if v is None
            else v.decode("utf-8", errors="replace")
            if as_string
            else decode_data(v, Encoding.BASE64),
        )
        for k, v in record.headers
    ]
    return ConsumedRecord(
        topic="t",
        partition=3,
        offset=record.offset,
        timestamp=record.timestamp,
        key=decode_data(record.key, key),
        value=decode_data(record.value, value),
        headers=headers,
    ).model_dump(mode="json")


@pytest.mark.parametrize("key", list(Encoding))
@pytest.mark.parametrize("value", list(Encoding))
@pytest.mark.parametrize("header", list(HeaderEncoding))
@settings(max_examples=40, deadline=None)
@given(record=records)
def test_the_renderer_gives_the_models_json(
    key: Encoding, value: Encoding, header: HeaderEncoding, record: Record
) -> None:
    assert renderer(key, value, header)("t", 3, record) == model_json(record, key, value, header)


@pytest.mark.parametrize("key", list(Encoding))
@pytest.mark.parametrize("value", list(Encoding))
@pytest.mark.parametrize("header", list(HeaderEncoding))
@settings(max_examples=20, deadline=None)
@given(batch=st.lists(records, max_size=4))
def test_the_partition_renderer_gives_the_models_json(
    key: Encoding, value: Encoding, header: HeaderEncoding, batch: list[Record]
) -> None:
    rendered = partition_renderer(key, value, header)("t", 3, batch)
    assert rendered == [model_json(record, key, value, header) for record in batch]
