"""Hypothesis strategies for the filter tests: syntax trees and records that often match them.

Names, strings and keys come from small pools shared by records and expressions, so that
generated filters hit, miss and meet missing fields in about equal measure. JSON values are
written with and without ``ensure_ascii`` (escapes exercise the raw-bytes pre-check), and some
values are not JSON at all.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

from yak.filters import (
    And,
    Comparison,
    Exists,
    Expression,
    Field,
    HeaderField,
    InList,
    KeyField,
    Literal,
    Not,
    Op,
    Or,
    StartsWith,
    TimestampField,
    ValueField,
)
from yak.record import Record

TEXTS = ["", "a", "ab", "é", "éa", 'x"y', "\u2028", "\U0001f600", "\\", "/", "and"]
NAMES = ["a", "b", "and", "a b"]
HEADER_NAMES = ["h", "g", "a b", "content-type"]

texts = st.sampled_from(TEXTS) | st.text(max_size=4)
numbers = st.sampled_from([0, 1, -1, 2, 1.0, 2.5, -0.5, 1000, 10**15]) | st.integers(-5, 5)
literals: st.SearchStrategy[Literal] = st.one_of(
    texts, numbers, st.booleans(), st.none(), st.floats(allow_nan=False, allow_infinity=False)
)

path_steps = st.sampled_from(NAMES) | st.integers(0, 1)
fields: st.SearchStrategy[Field] = st.one_of(
    st.just(KeyField()),
    st.just(TimestampField()),
    st.just(ValueField()),
    st.builds(HeaderField, st.sampled_from(HEADER_NAMES)),
    st.builds(ValueField, st.lists(path_steps, min_size=1, max_size=2).map(tuple)),
)

predicates: st.SearchStrategy[Expression] = st.one_of(
    st.builds(Comparison, fields, st.sampled_from(list(Op)), literals),
    st.builds(StartsWith, fields, texts),
    st.builds(InList, fields, st.lists(literals, min_size=1, max_size=3).map(tuple)),
    st.builds(Exists, fields),
)

value_paths = st.lists(path_steps, min_size=1, max_size=2).map(lambda p: ValueField(tuple(p)))
few_literals = st.sampled_from(["a", "é", 'x"y', "1", 1, 1.0, 0, 2.5, True, False, None])
value_predicates: st.SearchStrategy[Expression] = st.one_of(
    st.builds(Comparison, value_paths, st.sampled_from(list(Op)), few_literals),
    st.builds(StartsWith, value_paths, st.sampled_from(["", "a", "é", 'x"'])),
    st.builds(InList, value_paths, st.lists(few_literals, min_size=1, max_size=3).map(tuple)),
)


def _combine(children: st.SearchStrategy[Expression]) -> st.SearchStrategy[Expression]:
    operands = st.lists(children, min_size=2, max_size=3).map(tuple)
    return st.one_of(st.builds(And, operands), st.builds(Or, operands), st.builds(Not, children))


expressions: st.SearchStrategy[Expression] = st.recursive(predicates, _combine, max_leaves=6)

# --- records ---------------------------------------------------------------------------------

json_scalars = st.one_of(texts, numbers, st.booleans(), st.none())
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, min_size=1, max_size=3)
        | st.dictionaries(st.sampled_from(NAMES), inner, min_size=1, max_size=3)
    ),
    max_leaves=6,
)
# Mostly objects whose members the generated paths name (so value predicates often hold).
json_documents = st.dictionaries(st.sampled_from(NAMES), json_values, min_size=1) | json_values


@st.composite
def json_bytes(draw: st.DrawFn) -> bytes:
    document = draw(json_documents)
    return json.dumps(document, ensure_ascii=draw(st.booleans())).encode()


text_bytes = st.sampled_from(TEXTS).map(str.encode) | st.sampled_from([b"\xff", b"a\xc3", b"\x80"])
not_json = st.sampled_from([b"not json", b"{", b"[1,]", b'{"a": 1} x', b"NaN", b"\xff"])
values = st.one_of(
    json_bytes(), json_bytes(), st.none(), text_bytes, not_json, st.binary(max_size=6)
)
headers = st.lists(
    st.tuples(st.sampled_from(HEADER_NAMES), st.none() | text_bytes), max_size=3
).map(tuple)


@st.composite
def records(draw: st.DrawFn) -> Record:
    return Record(
        offset=draw(st.integers(0, 100)),
        timestamp=draw(st.sampled_from([0, 1, 2, 1000]) | st.integers(-(2**40), 2**40)),
        key=draw(st.none() | text_bytes | st.binary(max_size=4)),
        value=draw(values),
        headers=draw(headers),
    )


# --- records made to meet a given expression -------------------------------------------------


def _predicates_of(expression: Expression) -> list[Expression]:
    if isinstance(expression, And | Or):
        return [p for operand in expression.operands for p in _predicates_of(operand)]
    if isinstance(expression, Not):
        return _predicates_of(expression.operand)
    return [expression]


def _look_alikes(literal: Literal) -> list[Literal]:
    """Values Python would call equal or near that the language must tell apart."""
    if isinstance(literal, bool):
        return [literal, int(literal), str(literal).lower()]
    if isinstance(literal, int | float):
        return [literal, float(literal), bool(literal), str(literal), literal + 1]
    if literal is None:
        return [None, 0, False, "", "null"]
    return [literal, literal + "z", literal[:-1]]


def _literals_of(predicate: Expression) -> list[Literal]:
    if isinstance(predicate, Comparison):
        return _look_alikes(predicate.literal)
    if isinstance(predicate, StartsWith):
        return _look_alikes(predicate.prefix)
    if isinstance(predicate, InList):
        return [alike for literal in predicate.literals for alike in _look_alikes(literal)]
    return [None, "a", 1]


def _put(document: object, path: tuple[str | int, ...], value: object) -> object:
    """``document`` with ``value`` at ``path``, building objects and arrays on the way."""
    if not path:
        return value
    step, rest = path[0], path[1:]
    if isinstance(step, str):
        container = dict(document) if isinstance(document, dict) else {}
        container[step] = _put(container.get(step), rest, value)
        return container
    items = list(document) if isinstance(document, list) else []
    items.extend([None] * (step + 1 - len(items)))
    items[step] = _put(items[step], rest, value)
    return items


@st.composite
def records_for(draw: st.DrawFn, expression: Expression) -> Record:
    """A record whose fields often take the values the expression's predicates test."""
    record = draw(records())
    document: object = draw(json_documents)
    texts_seen: list[str] = []
    for predicate in _predicates_of(expression):
        choices = _literals_of(predicate)
        texts_seen += [c for c in choices if isinstance(c, str)]
        field = getattr(predicate, "field", None)
        if isinstance(field, ValueField) and field.path and draw(st.integers(0, 3)) > 0:
            document = _put(document, field.path, draw(st.sampled_from(choices)))
        if isinstance(field, HeaderField) and draw(st.booleans()):
            text = draw(st.sampled_from([c for c in choices if isinstance(c, str)] or ["a"]))
            record = record._replace(headers=((field.name, text.encode()), *record.headers))
    if draw(st.integers(0, 5)) > 0:
        ascii_only: bool = draw(st.booleans())
        record = record._replace(value=json.dumps(document, ensure_ascii=ascii_only).encode())
    if draw(st.booleans()) and texts_seen:
        key: str = draw(st.sampled_from(texts_seen))
        record = record._replace(key=key.encode())
    return record


@st.composite
def values_for(draw: st.DrawFn, predicate: Expression) -> Record:
    """A record with only a value, holding one of the predicate's look-alikes at its path."""
    field = getattr(predicate, "field", None)
    assert isinstance(field, ValueField)
    document = _put(
        draw(st.sampled_from([{}, [], {"a": 1}, {"b": [1, "a"]}])),
        field.path,
        draw(st.sampled_from(_literals_of(predicate))),
    )
    value = json.dumps(document, ensure_ascii=draw(st.booleans())).encode()
    return Record(0, 0, None, value)
