"""Syntax tree to a tree of closures: ``compile_expression``, ``compile_filter``, ``RecordFilter``.

``compile_filter(text)`` parses and compiles once per distinct text: a small LRU cache
(``CACHE_SIZE`` entries, keyed by the text) hands the same ``RecordFilter`` to every poll that
sends the same filter, so a consumer polling in a loop never re-parses. Errors are not cached
(a bad filter is refused on each request, at the cost of a parse bounded by the length limit).

Each predicate becomes one closure (``yak.filters.predicates``); ``and``/``or`` become
short-circuiting closures over two operands (longer chains nest), ``not`` a negation. The
filter's value-path predicates share one ``JsonValues``, so the value is parsed at most once
per record, and only by filters that name value fields. No ``eval``, no code generation.

A ``RecordFilter`` is immutable apart from that parse slot and safe to share between requests
and threads (see ``record_view``). Hot loops should bind ``matches`` once, or use ``select``,
which runs the loop in C (``filter``) and returns the records that pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from typing import TypeVar

from yak.filters.expression import (
    And,
    Expression,
    HeaderField,
    KeyField,
    Not,
    Or,
    TimestampField,
    ValueField,
)
from yak.filters.parser import parse_filter
from yak.filters.predicates import (
    Getter,
    Matcher,
    Predicate,
    json_matcher,
    number_matcher,
    text_matcher,
)
from yak.filters.record_view import MISSING, FilterRecord, JsonValues, first_header, walk

__all__ = ["CACHE_SIZE", "RecordFilter", "compile_expression", "compile_filter"]

#: Distinct filter texts kept compiled.
CACHE_SIZE = 256

R = TypeVar("R", bound=FilterRecord)

_key: Getter = attrgetter("key")
_value: Getter = attrgetter("value")
_timestamp: Getter = attrgetter("timestamp")


@dataclass(frozen=True, slots=True)
class RecordFilter:
    """A compiled filter: ``matches(record)`` is true for the records it lets through."""

    text: str
    expression: Expression
    matches: Matcher

    def __call__(self, record: FilterRecord) -> bool:
        return self.matches(record)

    def select(self, records: Iterable[R]) -> list[R]:
        """The records that pass, in order."""
        return list(filter(self.matches, records))


def compile_filter(text: str) -> RecordFilter:
    """The compiled filter of ``text`` (cached); raises ``InvalidFilterError`` and its kin."""
    return _compile_cached(text)


@lru_cache(maxsize=CACHE_SIZE)
def _compile_cached(text: str) -> RecordFilter:
    expression = parse_filter(text)
    return RecordFilter(text, expression, compile_expression(expression))


def compile_expression(expression: Expression) -> Matcher:
    """The closure tree of ``expression`` (no cache: ``compile_filter`` is the cached door)."""
    return _Compiler().compile(expression)


class _Compiler:
    """One compilation: owns the ``JsonValues`` its value-path predicates share."""

    def __init__(self) -> None:
        self._values: JsonValues | None = None

    def compile(self, node: Expression) -> Matcher:
        if isinstance(node, And):
            return _fold(_both, [self.compile(operand) for operand in node.operands])
        if isinstance(node, Or):
            return _fold(_either, [self.compile(operand) for operand in node.operands])
        if isinstance(node, Not):
            inner = self.compile(node.operand)
            return lambda record: not inner(record)
        return self._predicate(node)

    def _predicate(self, node: Predicate) -> Matcher:
        field = node.field
        if isinstance(field, KeyField):
            return text_matcher(_key, node)
        if isinstance(field, TimestampField):
            return number_matcher(_timestamp, node)
        if isinstance(field, HeaderField):
            return text_matcher(_header_getter(field.name), node)
        if not field.path:
            return text_matcher(_value, node)
        return json_matcher(self._path_getter(field), node)

    def _path_getter(self, field: ValueField) -> Getter:
        if self._values is None:
            self._values = JsonValues()
        parsed = self._values.of
        path = field.path
        if len(path) == 1 and isinstance(path[0], str):
            (name,) = path

            def member(record: FilterRecord) -> object:
                document = parsed(record)
                return document.get(name, MISSING) if type(document) is dict else MISSING

            return member
        return lambda record: walk(parsed(record), path)


def _header_getter(name: str) -> Getter:
    return lambda record: first_header(record.headers, name)


def _both(first: Matcher, second: Matcher) -> Matcher:
    return lambda record: first(record) and second(record)


def _either(first: Matcher, second: Matcher) -> Matcher:
    return lambda record: first(record) or second(record)


def _fold(join: Callable[[Matcher, Matcher], Matcher], matchers: list[Matcher]) -> Matcher:
    """``a op (b op (c ...))``: right-nested, so evaluation runs left to right."""
    combined = matchers[-1]
    for matcher in reversed(matchers[:-1]):
        combined = join(matcher, combined)
    return combined
