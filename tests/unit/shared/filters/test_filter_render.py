"""render_filter: canonical text that parses back to the same tree (examples and Hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from tests.unit.shared.filters.filter_strategies import expressions
from yak.filters import (
    And,
    Comparison,
    Exists,
    Expression,
    HeaderField,
    KeyField,
    Not,
    Op,
    Or,
    ValueField,
    parse_filter,
    render_filter,
)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ('key=="a"', 'key == "a"'),
        ('value . a [0]["b"] >= 1.5', "value.a[0].b >= 1.5"),
        ('value["a b"]["and"] == null', 'value["a b"].and == null'),
        ('headers["x"] startswith "\\u00e9"', 'headers.x startswith "é"'),
        ("value.n in [1,2.0 , true]", "value.n in [1, 2.0, true]"),
        ("not(exists(key))", "not exists(key)"),
        ("not (exists(key) or exists(value))", "not (exists(key) or exists(value))"),
        ("(exists(key)) and ((exists(value)))", "exists(key) and exists(value)"),
        ("timestamp > 1E3", "timestamp > 1000.0"),
    ],
)
def test_text_renders_canonically(text: str, canonical: str) -> None:
    assert render_filter(parse_filter(text)) == canonical


def test_nested_junctions_keep_their_parentheses() -> None:
    a, b, c = Exists(KeyField()), Exists(ValueField()), Exists(HeaderField("h"))
    tree = And((a, And((b, c))))
    assert render_filter(tree) == "exists(key) and (exists(value) and exists(headers.h))"
    assert parse_filter(render_filter(tree)) == tree
    either = render_filter(Or((And((a, b)), c)))
    assert either == "(exists(key) and exists(value)) or exists(headers.h)"


def test_strings_that_need_escapes_and_names_that_are_not_words_round_trip() -> None:
    tree = Comparison(ValueField(('a"b', "", "1x", 3)), Op.NE, "line\nbreak\t\u0000")
    text = render_filter(tree)
    assert text == 'value["a\\"b"][""]["1x"][3] != "line\\nbreak\\t\\u0000"'
    assert parse_filter(text) == tree


def test_a_not_of_a_not_stays_two_nots() -> None:
    tree = Not(Not(Exists(KeyField())))
    assert parse_filter(render_filter(tree)) == tree


@settings(max_examples=200, deadline=None)
@given(expression=expressions)
def test_any_tree_renders_to_text_that_parses_back_to_it(expression: Expression) -> None:
    text = render_filter(expression)
    again = parse_filter(text)
    assert again == expression
    assert render_filter(again) == text  # literal types too (Python says 1 == 1.0 == True)
