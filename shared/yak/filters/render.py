"""Syntax tree to text: ``render_filter``, the inverse of ``parse_filter``.

The text is canonical: one space around operators, strings as orjson writes JSON (so any
string, control characters included, comes back the same), floats as Python's shortest
``repr`` (which is also a JSON number), names written ``.name`` when they are plain words and
not keywords, ``["name"]`` otherwise. Operands of ``and``/``or`` that are themselves
``and``/``or`` are parenthesised, as is the operand of ``not`` when it is one, so
``parse_filter(render_filter(tree)) == tree`` for every tree (the tests check it with
Hypothesis). Used for logs, error bodies and the docs' examples. Pure functions.
"""

from __future__ import annotations

import re

import orjson

from yak.filters.expression import (
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
    Or,
    PathStep,
    StartsWith,
    TimestampField,
    ValueField,
)

__all__ = ["render_field", "render_filter", "render_literal"]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def render_filter(expression: Expression) -> str:
    """``expression`` as filter text that parses back to the same tree."""
    match expression:
        case Comparison(field, op, literal):
            return f"{render_field(field)} {op.value} {render_literal(literal)}"
        case StartsWith(field, prefix):
            return f"{render_field(field)} startswith {_string(prefix)}"
        case InList(field, literals):
            items = ", ".join(render_literal(literal) for literal in literals)
            return f"{render_field(field)} in [{items}]"
        case Exists(field):
            return f"exists({render_field(field)})"
        case Not(operand):
            inner = render_filter(operand)
            return f"not ({inner})" if isinstance(operand, And | Or) else f"not {inner}"
        case And(operands):
            return " and ".join(_operand(operand) for operand in operands)
        case Or(operands):
            return " or ".join(_operand(operand) for operand in operands)


def _operand(expression: Expression) -> str:
    text = render_filter(expression)
    return f"({text})" if isinstance(expression, And | Or) else text


def render_field(field: Field) -> str:
    """A field as the language writes it (``key``, ``headers.x``, ``value.a[0]`` ...)."""
    match field:
        case KeyField():
            return "key"
        case TimestampField():
            return "timestamp"
        case HeaderField(name):
            return "headers" + _step(name)
        case ValueField(path):
            return "value" + "".join(_step(step) for step in path)


def _step(step: PathStep) -> str:
    if isinstance(step, int):
        return f"[{step}]"
    if _WORD.fullmatch(step):
        return "." + step  # after a dot every word is a name, keywords included
    return f"[{_string(step)}]"


def render_literal(literal: Literal) -> str:
    """A literal as the language writes it (JSON's spelling)."""
    if literal is None:
        return "null"
    if isinstance(literal, bool):
        return "true" if literal else "false"
    if isinstance(literal, str):
        return _string(literal)
    return repr(literal)


def _string(text: str) -> str:
    return orjson.dumps(text).decode()
