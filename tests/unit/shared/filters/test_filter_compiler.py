"""compile_filter: boolean structure, the cache by text, RecordFilter's helpers, decoded records."""

from __future__ import annotations

import pytest

from yak.errors import InvalidFilterError
from yak.filters import RecordFilter, compile_expression, compile_filter, parse_filter
from yak.filters.compiler import CACHE_SIZE
from yak.record import Record, RecordInput, decode_batch, encode_batch

A = Record(0, 10, b"a", b'{"n": 1}', ())
B = Record(1, 20, b"b", b'{"n": 2}', (("h", b"x"),))
C = Record(2, 30, None, b"plain", ())


@pytest.mark.parametrize(
    ("text", "passing"),
    [
        ('key == "a" or key == "b"', [A, B]),
        ('key == "a" and value.n == 1', [A]),
        ('key == "a" and value.n == 2', []),
        ("not exists(key)", [C]),
        ("not (exists(headers.h) or value.n == 1)", [C]),
        ("value.n >= 1 and value.n <= 2 and timestamp > 15", [B]),
        ("exists(key) and not exists(headers.h) or timestamp == 30", [A, C]),
        ("exists(key) and (not exists(headers.h) or timestamp == 30)", [A]),
    ],
)
def test_and_or_not_combine_predicates(text: str, passing: list[Record]) -> None:
    assert compile_filter(text).select([A, B, C]) == passing


def test_the_same_text_is_compiled_once() -> None:
    text = 'key == "cached" and value.n == 1'
    first = compile_filter(text)
    assert compile_filter("".join(text)) is first  # an equal string built anew
    assert isinstance(first, RecordFilter)
    assert first.text == text
    assert first.expression == parse_filter(text)
    assert CACHE_SIZE >= 16


def test_bad_text_raises_every_time_and_is_not_cached() -> None:
    for _ in range(2):
        with pytest.raises(InvalidFilterError):
            compile_filter("key ==")


def test_calling_the_filter_and_its_matches_agree() -> None:
    compiled = compile_filter("value.n == 2")
    assert [compiled(r) for r in (A, B, C)] == [compiled.matches(r) for r in (A, B, C)]
    assert [compiled(r) for r in (A, B, C)] == [False, True, False]


def test_a_tree_compiles_without_text() -> None:
    matches = compile_expression(parse_filter("timestamp < 25"))
    assert [matches(r) for r in (A, B, C)] == [True, True, False]


def test_two_value_predicates_in_one_filter_read_their_own_record() -> None:
    compiled = compile_filter("value.n == 1 or value.n == 2")
    assert compiled.select([A, B, C, A]) == [A, B, A]


def test_records_decoded_from_a_batch_are_filtered_as_they_are() -> None:
    inputs = [RecordInput(f"k{i}".encode(), b'{"i": %d}' % i, (), 100 + i) for i in range(20)]
    records = decode_batch(encode_batch(inputs)).records
    chosen = compile_filter('value.i in [3, 13] or key == "k7"').select(records)
    assert [r.offset for r in chosen] == [3, 7, 13]
