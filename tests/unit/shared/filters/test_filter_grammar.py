"""The grammar's tree builder: the node and depth limits, checked as the parse goes."""

from __future__ import annotations

import pytest

from yak.errors import FilterTooLargeError, InvalidFilterError
from yak.filters import MAX_FILTER_DEPTH, MAX_FILTER_NODES, InList, Not, parse_filter
from yak.filters.grammar import GRAMMAR, TERMINAL_NAMES


def test_nesting_up_to_the_depth_limit_parses() -> None:
    tree = parse_filter("not " * (MAX_FILTER_DEPTH - 1) + "exists(key)")
    depth = 1
    while isinstance(tree, Not):
        tree, depth = tree.operand, depth + 1
    assert depth == MAX_FILTER_DEPTH


def test_nesting_past_the_depth_limit_is_too_large_and_says_where() -> None:
    text = "exists(key) and " + "not " * MAX_FILTER_DEPTH + "exists(key)"
    with pytest.raises(FilterTooLargeError) as caught:
        parse_filter(text)
    details = caught.value.details
    assert details["limit"] == "depth"
    assert details["maximum"] == MAX_FILTER_DEPTH
    assert details["position"] == len("exists(key) and ")  # the outermost `not` past the limit
    assert (details["line"], details["column"]) == (1, len("exists(key) and ") + 1)


def test_nesting_by_parentheses_counts_like_nesting_by_not() -> None:
    inner = "exists(key)"
    for _ in range(MAX_FILTER_DEPTH):
        inner = f"exists(key) and ({inner} or exists(key))"
    with pytest.raises(FilterTooLargeError) as caught:
        parse_filter(inner)
    assert caught.value.details["limit"] == "depth"


def test_more_nodes_than_the_limit_is_too_large() -> None:
    literals = ", ".join(["1"] * MAX_FILTER_NODES)  # plus the `in` itself: one too many
    with pytest.raises(FilterTooLargeError) as caught:
        parse_filter(f"value.n in [{literals}]")
    assert caught.value.details["limit"] == "nodes"
    assert caught.value.details["maximum"] == MAX_FILTER_NODES


def test_exactly_the_node_limit_parses() -> None:
    literals = ", ".join(["1"] * (MAX_FILTER_NODES - 1))
    tree = parse_filter(f"value.n in [{literals}]")
    assert isinstance(tree, InList)
    assert len(tree.literals) == MAX_FILTER_NODES - 1


def test_a_long_chain_of_predicates_counts_each_one() -> None:
    chain = " or ".join(["exists(key)"] * MAX_FILTER_NODES)
    with pytest.raises(FilterTooLargeError):
        parse_filter(chain)


def test_too_large_is_a_kind_of_invalid_filter() -> None:
    assert issubclass(FilterTooLargeError, InvalidFilterError)
    assert FilterTooLargeError.http_status == 400


def test_every_terminal_of_the_grammar_has_a_readable_name() -> None:
    declared = {line.split(":")[0] for line in GRAMMAR.splitlines() if line[:1].isupper()}
    declared |= {line.split(":")[0] for line in GRAMMAR.splitlines() if line.startswith("_")}
    assert declared <= set(TERMINAL_NAMES)
