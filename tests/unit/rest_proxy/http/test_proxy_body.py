"""Request bodies have JSON's types, as the OpenAPI document states them (``http.body``)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from yak.errors import InvalidRequestError
from yak_rest_proxy.http.body import parse_model


class Entry(BaseModel):
    partition: int
    auto_commit: bool = True
    name: str = "n"
    ratio: float = 0.0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"partition": false}', "partition"),
        (b'{"partition": "3"}', "partition"),
        (b'{"partition": 3.5}', "partition"),
        (b'{"partition": 1, "auto_commit": 0}', "auto_commit"),
        (b'{"partition": 1, "auto_commit": "true"}', "auto_commit"),
        (b'{"partition": 1, "name": 7}', "name"),
    ],
)
def test_a_value_of_another_json_type_is_refused(body: bytes, field: str) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        parse_model(Entry, body)
    assert refused.value.details["kind"] == "invalid_body"
    assert refused.value.message.startswith(f"invalid request body: {field}:")


def test_an_integer_written_with_a_fraction_is_that_integer() -> None:
    parsed = parse_model(Entry, b'{"partition": 3.0, "ratio": 2}')
    assert parsed.partition == 3
    assert type(parsed.partition) is int
    assert parsed.ratio == 2.0


def test_malformed_json_is_told_apart() -> None:
    with pytest.raises(InvalidRequestError) as refused:
        parse_model(Entry, b'{"partition": ')
    assert refused.value.details["kind"] == "malformed_json"
