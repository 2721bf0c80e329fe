"""The compiled filter agrees with a plain-Python reference evaluator on random records and
random expressions (generated as trees, rendered to text, compiled from the text).

The reference is written from docs/filters.md's rules, independently of the compiler: text
fields are decoded to ``str`` when they are UTF-8 (and compared as bytes otherwise), values are
parsed with the standard library's ``json``, and every rule is spelled out per type.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.shared.filters.filter_strategies import (
    expressions,
    records,
    records_for,
    value_predicates,
    values_for,
)
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
    compile_expression,
    compile_filter,
    render_filter,
)
from yak.record import Record

MISSING = object()

ORDER: dict[Op, Callable[[Any, Any], bool]] = {
    Op.LT: operator.lt,
    Op.LE: operator.le,
    Op.GT: operator.gt,
    Op.GE: operator.ge,
}


def _text(raw: bytes | None) -> object:
    if raw is None:
        return MISSING
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw  # not UTF-8: compared as bytes


def _reject(constant: str) -> object:
    raise ValueError(constant)  # NaN and Infinity are not JSON


def _json(raw: bytes | None) -> object:
    if raw is None:
        return MISSING
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_reject)
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return MISSING


def field_value(field: Field, record: Record) -> object:
    if isinstance(field, KeyField):
        return _text(record.key)
    if isinstance(field, TimestampField):
        return record.timestamp
    if isinstance(field, HeaderField):
        for name, value in record.headers:
            if name == field.name:
                return _text(value)
        return MISSING
    if not field.path:
        return _text(record.value)
    document = _json(record.value)
    for step in field.path:
        if isinstance(document, dict) and isinstance(step, str) and step in document:
            document = document[step]
            continue
        if isinstance(document, list) and isinstance(step, int) and step < len(document):
            document = document[step]
            continue
        return MISSING
    return document


def _number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def equal(x: object, literal: Literal) -> bool:
    if isinstance(x, bytes):
        return isinstance(literal, str) and x == literal.encode()
    if isinstance(x, bool) or isinstance(literal, bool):
        return isinstance(x, bool) and isinstance(literal, bool) and x == literal
    if x is None or literal is None:
        return x is None and literal is None
    if isinstance(x, str) or isinstance(literal, str):
        return isinstance(x, str) and isinstance(literal, str) and x == literal
    return _number(x) and _number(literal) and x == literal


def ordered(op: Op, x: object, literal: Literal) -> bool:
    if isinstance(x, str) and isinstance(literal, str):
        return ORDER[op](x, literal)
    if isinstance(x, bytes) and isinstance(literal, str):
        return ORDER[op](x, literal.encode())
    if _number(x) and _number(literal):
        return ORDER[op](x, literal)
    return False


def evaluate(expression: Expression, record: Record) -> bool:
    """The reference: docs/filters.md's rules, one by one."""
    if isinstance(expression, And):
        return all(evaluate(operand, record) for operand in expression.operands)
    if isinstance(expression, Or):
        return any(evaluate(operand, record) for operand in expression.operands)
    if isinstance(expression, Not):
        return not evaluate(expression.operand, record)
    x = field_value(expression.field, record)
    if isinstance(expression, Exists):
        return x is not MISSING
    if x is MISSING:
        return False  # every other predicate on a missing field is false
    if isinstance(expression, StartsWith):
        if isinstance(x, bytes):
            return x.startswith(expression.prefix.encode())
        return isinstance(x, str) and x.startswith(expression.prefix)
    if isinstance(expression, InList):
        return any(equal(x, literal) for literal in expression.literals)
    assert isinstance(expression, Comparison)
    if expression.op is Op.EQ:
        return equal(x, expression.literal)
    if expression.op is Op.NE:
        return not equal(x, expression.literal)
    return ordered(expression.op, x, expression.literal)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), expression=expressions)
def test_the_compiled_filter_agrees_with_the_reference(
    data: st.DataObject, expression: Expression
) -> None:
    compiled = compile_filter(render_filter(expression))
    for record in data.draw(st.lists(records_for(expression), min_size=1, max_size=10)):
        assert compiled(record) == evaluate(expression, record), (render_filter(expression), record)


@settings(max_examples=60, deadline=None)
@given(expression=expressions, record=records())
def test_a_tree_compiled_directly_agrees_with_its_text_compiled(
    expression: Expression, record: Record
) -> None:
    assert compile_expression(expression)(record) == evaluate(expression, record)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), predicate=value_predicates)
def test_value_field_predicates_agree_with_the_reference(
    data: st.DataObject, predicate: Expression
) -> None:
    """Predicates on JSON value paths alone: look-alike values (1, 1.0, true, "1") and escapes."""
    compiled = compile_filter(render_filter(predicate))
    for record in data.draw(st.lists(values_for(predicate), min_size=1, max_size=10)):
        assert compiled(record) == evaluate(predicate, record), (render_filter(predicate), record)
