"""parse_filter: every construct, keywords as member names, and errors that say where."""

from __future__ import annotations

import pytest

from yak.errors import FilterTooLargeError, InvalidFilterError
from yak.filters import (
    MAX_FILTER_LENGTH,
    And,
    Comparison,
    Exists,
    HeaderField,
    InList,
    KeyField,
    Not,
    Op,
    Or,
    StartsWith,
    TimestampField,
    ValueField,
    parse_filter,
)


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ('key == "a"', Comparison(KeyField(), Op.EQ, "a")),
        ("timestamp >= 1700000000000", Comparison(TimestampField(), Op.GE, 1700000000000)),
        ('value != "x"', Comparison(ValueField(), Op.NE, "x")),
        ("value.a.b < 2.5", Comparison(ValueField(("a", "b")), Op.LT, 2.5)),
        ('value["x y"][0] <= -1e3', Comparison(ValueField(("x y", 0)), Op.LE, -1000.0)),
        ("value.n > 0", Comparison(ValueField(("n",)), Op.GT, 0)),
        ('headers.content-type == "json"', Comparison(HeaderField("content-type"), Op.EQ, "json")),
        ('headers["a b"] startswith "x"', StartsWith(HeaderField("a b"), "x")),
        ("value.ok in [true, false, null, 1]", InList(ValueField(("ok",)), (True, False, None, 1))),
        ("exists(value.deleted)", Exists(ValueField(("deleted",)))),
        ("not exists(key)", Not(Exists(KeyField()))),
        # after a dot every word is a member name, keywords included
        ("value.and.not.in == null", Comparison(ValueField(("and", "not", "in")), Op.EQ, None)),
        ('key == "\\u00e9\\n\\""', Comparison(KeyField(), Op.EQ, 'é\n"')),
    ],
)
def test_each_construct_parses_to_its_tree(text: str, tree: object) -> None:
    assert parse_filter(text) == tree


def test_and_binds_tighter_than_or_and_not_tighter_than_and() -> None:
    a, b, c = (Exists(HeaderField(n)) for n in "abc")
    assert parse_filter("exists(headers.a) or exists(headers.b) and exists(headers.c)") == Or(
        (a, And((b, c)))
    )
    assert parse_filter("not exists(headers.a) and exists(headers.b)") == And((Not(a), b))
    assert parse_filter("(exists(headers.a) or exists(headers.b)) and exists(headers.c)") == And(
        (Or((a, b)), c)
    )


def test_chains_are_one_node_and_parentheses_nest() -> None:
    a, b, c = (Exists(HeaderField(n)) for n in "abc")
    assert parse_filter("exists(headers.a) and exists(headers.b) and exists(headers.c)") == And(
        (a, b, c)
    )
    assert parse_filter("exists(headers.a) and (exists(headers.b) and exists(headers.c))") == And(
        (a, And((b, c)))
    )


def test_numbers_keep_their_type_int_unless_written_with_a_fraction_or_exponent() -> None:
    literals = parse_filter("value.n in [1, 1.0, 1e2, -0]")
    assert isinstance(literals, InList)
    assert [type(x) for x in literals.literals] == [int, float, float, int]


def _error(text: str) -> InvalidFilterError:
    with pytest.raises(InvalidFilterError) as caught:
        parse_filter(text)
    return caught.value


def test_a_syntax_error_names_line_column_position_and_what_was_expected() -> None:
    error = _error('key == "a" and\n  (value.n >\n   "x" or)')
    assert type(error) is InvalidFilterError
    assert error.code == "INVALID_FILTER"
    assert error.http_status == 400
    assert error.details["line"] == 3
    assert error.details["column"] == 10
    assert error.details["position"] == len('key == "a" and\n  (value.n >\n   "x" or')
    assert "(" in error.details["expected"]
    assert "at line 3, column 10" in error.message
    assert "unexpected ')'" in error.message


def test_an_unknown_character_is_reported_where_it_is() -> None:
    error = _error("key\t== 'a'")
    assert (error.details["line"], error.details["column"], error.details["position"]) == (1, 8, 7)
    assert error.details["expected"] == ["a number", "a string", "false", "null", "true"]


def test_a_filter_that_stops_early_is_reported_at_its_end() -> None:
    error = _error('(key == "a"\n')
    assert (error.details["line"], error.details["column"]) == (1, 12)
    assert error.details["expected"] == [")"]
    assert "unexpected end of the filter" in error.message


@pytest.mark.parametrize(
    ("text", "position", "words"),
    [
        ("size == 1", 0, "unknown field 'size'"),
        ("key.x == 1", 4, "key has no fields"),
        ("timestamp[0] == 1", 9, "timestamp has no fields"),
        ("headers == 1", 0, "headers needs a name"),
        ("headers[0] == 1", 7, "not an index"),
        ("headers.a.b == 1", 10, "no fields"),
        ('key == "\\ud800"', 7, "invalid string"),
        ('key == "\\x41"', 7, "invalid string"),
        ("timestamp > 1e999", 12, "out of range"),
        ("key == 01", 8, "unexpected '1'"),
        ("value[-1] == 1", 6, "expected a string or an array index"),
        ("key in []", 8, "unexpected ']'"),
        ("Key == 1", 0, "unknown field 'Key'"),
        ("key == TRUE", 7, "unexpected 'TRUE'"),
        ("", 0, "unexpected end of the filter"),
    ],
)
def test_bad_filters_are_refused_at_the_offending_token(
    text: str, position: int, words: str
) -> None:
    error = _error(text)
    assert error.details["position"] == position
    assert words in error.message


def test_a_text_longer_than_the_limit_is_refused_before_parsing() -> None:
    text = "key == " + '"' + "a" * MAX_FILTER_LENGTH + '"'
    with pytest.raises(FilterTooLargeError) as caught:
        parse_filter(text)
    assert caught.value.code == "FILTER_TOO_LARGE"
    assert caught.value.details == {
        "limit": "length",
        "maximum": MAX_FILTER_LENGTH,
        "length": len(text),
    }


def test_a_text_of_exactly_the_limit_is_parsed() -> None:
    filler = "a" * (MAX_FILTER_LENGTH - len('key == ""'))
    assert parse_filter(f'key == "{filler}"') == Comparison(KeyField(), Op.EQ, filler)


def test_a_megabyte_of_garbage_is_refused_by_length_alone() -> None:
    with pytest.raises(FilterTooLargeError):
        parse_filter("(" * 1_000_000)
