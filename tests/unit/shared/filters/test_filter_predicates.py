"""Predicates: every operator on every kind of field, missing fields, types that do not mix,
bytes that are not UTF-8, and the raw-bytes pre-check that must never change an answer."""

from __future__ import annotations

import pytest

from yak.filters import compile_filter
from yak.record import Record

ORDER = Record(
    offset=7,
    timestamp=1_000,
    key=b"ord-42",
    value=b'{"status": "cancelled", "n": 5, "f": 2.5, "ok": true, "none": null,'
    b' "tags": ["a", "b"], "who": {"name": "\xc3\xa9va"}}',
    headers=(("region", b"eu-west"), ("trace", None), ("region", b"us-east")),
)
TOMBSTONE = Record(offset=8, timestamp=2_000, key=None, value=None, headers=())


def passes(text: str, record: Record = ORDER) -> bool:
    return compile_filter(text)(record)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('key == "ord-42"', True),
        ('key != "ord-42"', False),
        ('key < "ord-5"', True),  # strings order as strings: "ord-42" < "ord-5"
        ('key <= "ord-42"', True),
        ('key > "ord-42"', False),
        ('key >= "ord-"', True),
        ('key startswith "ord-"', True),
        ('key startswith "ORD"', False),
        ('key in ["x", "ord-42"]', True),
        ("exists(key)", True),
        ("key == 42", False),  # text against a number: types do not mix
        ("key != 42", True),  # present, and not equal
        ("key > 1", False),
    ],
)
def test_the_key_is_text(text: str, expected: bool) -> None:
    assert passes(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("timestamp == 1000", True),
        ("timestamp == 1000.0", True),  # numbers compare numerically
        ("timestamp != 1000", False),
        ("timestamp < 1001", True),
        ("timestamp <= 999.5", False),
        ("timestamp > 999", True),
        ("timestamp >= 1000", True),
        ("timestamp in [1, 1000]", True),
        ('timestamp in [true, "1000"]', False),
        ('timestamp == "1000"', False),
        ("timestamp == true", False),
        ('timestamp != "1000"', True),
        ('timestamp startswith "1"', False),
        ("exists(timestamp)", True),
    ],
)
def test_the_timestamp_is_a_number(text: str, expected: bool) -> None:
    assert passes(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('headers.region == "eu-west"', True),  # the first of the repeated header
        ('headers.region == "us-east"', False),
        ('headers.region in ["us-east"]', False),
        ('headers["region"] startswith "eu"', True),
        ("exists(headers.region)", True),
        ("exists(headers.trace)", False),  # a null header value is missing
        ('headers.trace != "x"', False),
        ("headers.trace == null", False),
        ("exists(headers.nope)", False),
        ('headers.nope != "x"', False),
    ],
)
def test_headers_are_text_and_the_first_of_a_name_counts(text: str, expected: bool) -> None:
    assert passes(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('value.status == "cancelled"', True),
        ('value.status != "shipped"', True),
        ('value.status startswith "canc"', True),
        ('value.status in ["shipped", "cancelled"]', True),
        ("value.n == 5.0", True),
        ("value.n > 4", True),
        ("value.f < 3", True),
        ("value.f >= 2.5", True),
        ("value.ok == true", True),
        ("value.ok == 1", False),  # true is not the number 1
        ("value.n == true", False),
        ("value.ok > false", False),  # booleans are not ordered
        ("value.none == null", True),
        ("exists(value.none)", True),  # null is present
        ("value.none != null", False),
        ("value.none != 1", True),
        ("value.none < 1", False),
        ('value.tags[1] == "b"', True),
        ("exists(value.tags[2])", False),
        ('value.tags == "a"', False),  # an array equals no literal
        ('value.tags != "a"', True),
        ('value.who.name == "éva"', True),
        ('value.who.name > "e"', True),  # "é" sorts after "e" (by code point)
        ('value.n == "5"', False),
        ('value.n startswith "5"', False),
        ("value.missing == null", False),
        ('value.missing != "x"', False),
        ("not exists(value.missing)", True),
        ('not value.missing == "x"', True),  # `not` is plain negation of a false predicate
        ('value == "x"', False),  # the whole value is text
        ('value startswith "{\\"status\\""', True),
    ],
)
def test_value_fields_are_json(text: str, expected: bool) -> None:
    assert passes(text) is expected


@pytest.mark.parametrize(
    "text",
    [
        'key == "x"',
        'key != "x"',
        'key < "x"',
        'key startswith ""',
        'key in [""]',
        'value == ""',
        'value != "x"',
        "value.a == null",
        "value.a != 1",
        "value[0] in [null]",
    ],
)
def test_every_predicate_on_a_missing_field_is_false(text: str) -> None:
    assert passes(text, TOMBSTONE) is False
    assert passes(f"not ({text})", TOMBSTONE) is True


def test_exists_tells_null_key_and_value_apart_from_empty_ones() -> None:
    empty = Record(0, 0, b"", b"", ())
    assert passes("exists(key) and exists(value)", empty)
    assert not passes("exists(key) or exists(value)", TOMBSTONE)
    assert passes('key == "" and value == ""', empty)


@pytest.mark.parametrize("raw", [b"not json", b'{"status": ', b"\xff{}", b"[1, 2]"])
def test_a_value_that_is_not_a_json_object_has_no_members(raw: bytes) -> None:
    record = Record(0, 0, None, raw)
    assert not passes("exists(value.status)", record)
    assert not passes('value.status != "x"', record)
    assert passes("exists(value)", record)  # the whole value is still there, as text


def test_bytes_that_are_not_utf8_compare_as_bytes_and_equal_no_literal() -> None:
    record = Record(0, 0, b"ab\xff", b"\xff", (("h", b"\xc3"),))
    assert passes('key startswith "ab"', record)
    assert not passes('key == "ab\\ufffd"', record)  # no decoding with replacement
    assert passes('key != "ab"', record)
    assert passes('key > "ab"', record)
    assert not passes('headers.h == "\\u00c3"', record)
    assert passes("exists(headers.h)", record)
    assert not passes("exists(value.x)", record)  # not JSON either


def test_text_orders_by_code_point_like_python_strings() -> None:
    # U+FFFD (3 bytes in UTF-8) sorts below U+1F600 (4 bytes), as str does.
    record = Record(0, 0, "\ufffd".encode(), None, ())
    assert passes('key < "\\ud83d\\ude00"', record)
    assert "\ufffd" < "\U0001f600"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"status": "\\u0063ancelled"}',  # an escape spells the literal: no plain needle
        b'{"status": "cancel\\u006ced"}',
        b'{"status":"cancelled"}',
    ],
)
def test_the_raw_bytes_pre_check_never_hides_an_escaped_match(raw: bytes) -> None:
    record = Record(0, 0, None, raw)
    assert passes('value.status == "cancelled"', record)
    assert passes('value.status startswith "canc"', record)
    assert passes('value.status in ["x", "cancelled"]', record)


def test_the_pre_check_skips_parsing_when_the_literal_cannot_be_there() -> None:
    # Invalid JSON without the needle: false without a parse; with the needle: parsed, false.
    assert not passes('value.a == "zz"', Record(0, 0, None, b'{"a": "y", oops'))
    assert not passes('value.a == "y"', Record(0, 0, None, b'{"a": "y", oops'))
    assert passes('value.a == "x\\"y"', Record(0, 0, None, b'{"a": "x\\"y"}'))
