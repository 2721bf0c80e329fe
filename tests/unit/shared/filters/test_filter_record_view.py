"""record_view: the first header of a name, the JSON value parsed once, path walking."""

from __future__ import annotations

import pytest

from yak.filters.record_view import MISSING, JsonValues, first_header, walk
from yak.record import Record, RecordInput, decode_batch, encode_batch


def test_the_first_header_of_a_name_wins_even_when_it_is_null() -> None:
    headers = (("a", b"1"), ("b", None), ("a", b"2"), ("b", b"3"))
    assert first_header(headers, "a") == b"1"
    assert first_header(headers, "b") is None  # null: the later non-null one is not used
    assert first_header(headers, "c") is None
    assert first_header((), "a") is None


def test_the_value_is_parsed_once_for_every_predicate_of_one_record() -> None:
    values = JsonValues()
    record = Record(0, 0, None, b'{"a": [1, 2]}')
    first = values.of(record)
    assert first == {"a": [1, 2]}
    assert values.of(record) is first  # the same parse, not a second one
    other = Record(1, 0, None, b'{"a": [3]}')
    assert values.of(other) == {"a": [3]}


@pytest.mark.parametrize("raw", [None, b"", b"not json", b"{", b"\xff\xfe", b'"\xff"', b"NaN"])
def test_null_values_and_values_that_are_not_json_are_missing(raw: bytes | None) -> None:
    assert JsonValues().of(Record(0, 0, None, raw)) is MISSING


def test_json_null_is_a_value_not_missing() -> None:
    assert JsonValues().of(Record(0, 0, None, b"null")) is None


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (("a",), {"b": [10, {"c": None}]}),
        (("a", "b", 0), 10),
        (("a", "b", 1, "c"), None),
        (("a", "b", 2), MISSING),
        (("a", "x"), MISSING),
        (("a", 0), MISSING),  # an index into an object
        (("a", "b", "0"), MISSING),  # a name into an array
        (("a", "b", 0, "c"), MISSING),  # into a number
    ],
)
def test_walk_follows_names_into_objects_and_indexes_into_arrays(
    path: tuple[str | int, ...], expected: object
) -> None:
    found = walk({"a": {"b": [10, {"c": None}]}}, path)
    if expected is MISSING:
        assert found is MISSING
    else:
        assert found == expected


def test_records_from_the_decoder_are_record_views() -> None:
    batch = encode_batch([RecordInput(b"k", b'{"x": 1}', (("h", b"v"),), 5)])
    (record,) = decode_batch(batch).records
    assert first_header(record.headers, "h") == b"v"
    assert JsonValues().of(record) == {"x": 1}
