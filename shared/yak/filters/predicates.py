"""Predicates as closures: one small function per predicate of a filter, typed at compile time.

Semantics (docs/filters.md states them for users; the tests' reference evaluator follows them):

* A predicate on a **missing** field is false: ``==``, ``!=``, ``<`` ..., ``startswith``,
  ``in``. Only ``exists(field)`` is true or false about presence itself.
* ``==`` is true when field and literal have the same type and are equal: numbers compare
  numerically (``1 == 1.0``), strings by code point, ``true``/``false``/``null`` only equal
  themselves. Mixed types are never equal: ``timestamp == "5"`` is false, and ``true`` is not
  the number 1.
* ``!=`` is ``exists(field) and not (field == literal)``: true for a present field of another
  type (``key != 5`` holds for every record with a key).
* ``<``, ``<=``, ``>``, ``>=`` order numbers with numbers and strings with strings; any other
  pair (booleans, null, objects, arrays, mixed types) is false.
* ``startswith`` holds for a string field that begins with the prefix; ``in`` holds when the
  field ``==`` one of the literals.

Key, whole value and headers are bytes: compared to the literal's UTF-8 encoding (same order as
``str``; bytes that are not UTF-8 are compared as they are, so they never equal a literal).
The timestamp is a number. Value paths are JSON values (see ``record_view``).

Per-record cost: each closure does one attribute read and one comparison, with the type
decisions taken here once. Value-path predicates that can only hold if the raw value contains
a given string (``==`` a string, ``startswith``, ``in`` strings) first look for it in the raw
bytes: without it and without any backslash (a JSON escape could spell it otherwise) the
predicate is false and the value is never parsed.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import orjson

from yak.filters.expression import Comparison, Exists, InList, Literal, Op, StartsWith
from yak.filters.record_view import MISSING, FilterRecord

__all__ = [
    "Getter",
    "Matcher",
    "Predicate",
    "json_matcher",
    "never",
    "number_matcher",
    "text_matcher",
]

#: A compiled filter or sub-filter: true when the record passes.
Matcher = Callable[[FilterRecord], bool]
#: Reads one field of a record (bytes, an int, a parsed JSON value, ``None`` or ``MISSING``).
Getter = Callable[[FilterRecord], Any]
#: A predicate node of the syntax tree.
Predicate = Comparison | StartsWith | InList | Exists

_ORDER: dict[Op, Callable[[Any, Any], bool]] = {
    Op.LT: operator.lt,
    Op.LE: operator.le,
    Op.GT: operator.gt,
    Op.GE: operator.ge,
}


def never(record: FilterRecord) -> bool:
    """The matcher of a predicate no record can pass (``key == 5``)."""
    return False


def always(record: FilterRecord) -> bool:
    """The matcher of a predicate every record passes (``timestamp != "x"``)."""
    return True


def _is_number(literal: Literal) -> bool:
    return isinstance(literal, int | float) and not isinstance(literal, bool)


def text_matcher(get: Getter, node: Predicate) -> Matcher:
    """A predicate on bytes-or-None text (key, whole value, header value)."""
    if isinstance(node, Exists):
        return lambda record: get(record) is not None
    if isinstance(node, StartsWith):
        prefix = node.prefix.encode()
        return lambda record: (x := get(record)) is not None and x.startswith(prefix)
    if isinstance(node, InList):
        texts = frozenset(lit.encode() for lit in node.literals if isinstance(lit, str))
        return (lambda record: get(record) in texts) if texts else never
    literal = node.literal
    if node.op is Op.NE:
        if not isinstance(literal, str):
            return lambda record: get(record) is not None
        other = literal.encode()
        return lambda record: (x := get(record)) is not None and x != other
    if not isinstance(literal, str):
        return never
    text = literal.encode()
    if node.op is Op.EQ:
        return lambda record: get(record) == text
    order = _ORDER[node.op]
    return lambda record: (x := get(record)) is not None and order(x, text)


def number_matcher(get: Getter, node: Predicate) -> Matcher:
    """A predicate on a field that is always a number (the timestamp)."""
    if isinstance(node, Exists):
        return always
    if isinstance(node, StartsWith):
        return never
    if isinstance(node, InList):
        numbers = frozenset(lit for lit in node.literals if _is_number(lit))
        return (lambda record: get(record) in numbers) if numbers else never
    literal = node.literal
    if not _is_number(literal):
        return always if node.op is Op.NE else never
    if node.op is Op.EQ:
        return lambda record: get(record) == literal
    if node.op is Op.NE:
        return lambda record: get(record) != literal
    order = _ORDER[node.op]
    return lambda record: order(get(record), literal)


def json_matcher(get: Getter, node: Predicate) -> Matcher:
    """A predicate on a JSON value path (``get`` gives the element or ``MISSING``)."""
    test = _json_test(node)
    needles = _needles(node)
    if not needles:
        return lambda record: test(get(record))
    if len(needles) == 1:
        (needle,) = needles

        def match_one(record: FilterRecord) -> bool:
            raw = record.value
            if raw is None or (needle not in raw and b"\\" not in raw):
                return False
            return test(get(record))

        return match_one

    def match_any(record: FilterRecord) -> bool:
        raw = record.value
        if raw is None:
            return False
        if any(n in raw for n in needles) or b"\\" in raw:
            return test(get(record))
        return False

    return match_any


def _needles(node: Predicate) -> tuple[bytes, ...]:
    """Byte strings one of which an unescaped JSON value must contain for ``node`` to hold."""
    if isinstance(node, StartsWith):
        return (orjson.dumps(node.prefix)[:-1],)  # the opening quote and the prefix
    if isinstance(node, Comparison) and node.op is Op.EQ and isinstance(node.literal, str):
        return (orjson.dumps(node.literal),)
    if isinstance(node, InList) and all(isinstance(lit, str) for lit in node.literals):
        return tuple(orjson.dumps(lit) for lit in node.literals)
    return ()


def _json_test(node: Predicate) -> Callable[[object], bool]:
    if isinstance(node, Exists):
        return lambda x: x is not MISSING
    if isinstance(node, StartsWith):
        prefix = node.prefix
        return lambda x: type(x) is str and x.startswith(prefix)
    if isinstance(node, InList):
        return _json_in(node.literals)
    equal = _json_equal(node.literal)
    if node.op is Op.EQ:
        return equal
    if node.op is Op.NE:
        return lambda x: x is not MISSING and not equal(x)
    order, literal = _ORDER[node.op], node.literal
    if isinstance(literal, str):
        return lambda x: type(x) is str and order(x, literal)
    if _is_number(literal):
        return lambda x: (type(x) is int or type(x) is float) and order(x, literal)
    return lambda x: False


def _json_equal(literal: Literal) -> Callable[[object], bool]:
    if literal is None or isinstance(literal, bool):
        return lambda x: x is literal
    if isinstance(literal, str):
        return lambda x: type(x) is str and x == literal
    return lambda x: (type(x) is int or type(x) is float) and x == literal


def _json_in(literals: tuple[Literal, ...]) -> Callable[[object], bool]:
    texts = frozenset(lit for lit in literals if isinstance(lit, str))
    numbers = frozenset(lit for lit in literals if _is_number(lit))
    flags = frozenset(lit for lit in literals if isinstance(lit, bool))
    null = None in literals

    def test(x: object) -> bool:
        kind = type(x)
        if kind is str:
            return x in texts
        if kind is int or kind is float:
            return x in numbers
        if kind is bool:
            return x in flags
        return null and x is None

    return test
