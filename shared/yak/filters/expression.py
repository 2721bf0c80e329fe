"""The filter language's syntax tree: immutable values the parser builds and the compiler reads.

A filter is an ``Expression``: predicates on one ``Field`` of a record, combined with ``And``,
``Or`` and ``Not``. ``And``/``Or`` hold two or more operands in source order (``a and b and c``
is one ``And``; parentheses make a nested one), so ``render_filter`` can write any tree back as
text that parses to the same tree.

Fields:

* ``KeyField()`` — the record key, compared as UTF-8 text;
* ``TimestampField()`` — the record timestamp, milliseconds since the epoch;
* ``HeaderField(name)`` — the value of the *first* header called ``name``, as UTF-8 text;
* ``ValueField(())`` — the whole value as UTF-8 text; ``ValueField(path)`` with a non-empty
  path — a field of the value parsed as JSON (``str`` steps pick object members, ``int`` steps
  pick array elements).

A ``Literal`` is a plain Python value: ``str``, ``int``, ``float`` (finite), ``bool`` or
``None`` (JSON ``null``). Note that Python counts ``True == 1``: compare trees by their rendered
text when literal types matter.

The size limits live here so that the parser (which enforces them) and the docs name the same
constants. Immutable values with no behaviour; safe to share between threads.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = [
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_LENGTH",
    "MAX_FILTER_NODES",
    "And",
    "Comparison",
    "Exists",
    "Expression",
    "Field",
    "HeaderField",
    "InList",
    "KeyField",
    "Literal",
    "Not",
    "Op",
    "Or",
    "PathStep",
    "StartsWith",
    "TimestampField",
    "ValueField",
]

#: Characters a filter's text may have (checked before parsing).
MAX_FILTER_LENGTH = 4_096
#: Nodes a filter may have: each predicate, ``and``/``or``/``not`` and literal of an ``in`` list.
MAX_FILTER_NODES = 512
#: How deeply ``and``/``or``/``not`` may nest (a predicate alone has depth 1).
MAX_FILTER_DEPTH = 32

#: A literal of the language (JSON's scalars).
Literal = str | int | float | bool | None
#: One step of a JSON path: an object member's name or an array index.
PathStep = str | int


@dataclass(frozen=True, slots=True)
class KeyField:
    """The record key (UTF-8 text); missing when the key is null."""


@dataclass(frozen=True, slots=True)
class TimestampField:
    """The record timestamp in milliseconds since the epoch; never missing."""


@dataclass(frozen=True, slots=True)
class HeaderField:
    """The first header named ``name`` (UTF-8 text); missing when absent or its value is null."""

    name: str


@dataclass(frozen=True, slots=True)
class ValueField:
    """The whole value as text (empty ``path``) or a field of the value parsed as JSON."""

    path: tuple[PathStep, ...] = ()


Field = KeyField | TimestampField | HeaderField | ValueField


class Op(enum.Enum):
    """A comparison operator, valued by its spelling in the language."""

    EQ = "=="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="


@dataclass(frozen=True, slots=True)
class Comparison:
    """``field <op> literal``."""

    field: Field
    op: Op
    literal: Literal


@dataclass(frozen=True, slots=True)
class StartsWith:
    """``field startswith "prefix"``."""

    field: Field
    prefix: str


@dataclass(frozen=True, slots=True)
class InList:
    """``field in [literal, ...]`` (one literal or more)."""

    field: Field
    literals: tuple[Literal, ...]


@dataclass(frozen=True, slots=True)
class Exists:
    """``exists(field)``."""

    field: Field


@dataclass(frozen=True, slots=True)
class And:
    """Two or more operands, all true."""

    operands: tuple[Expression, ...]


@dataclass(frozen=True, slots=True)
class Or:
    """Two or more operands, one true."""

    operands: tuple[Expression, ...]


@dataclass(frozen=True, slots=True)
class Not:
    """The operand's negation (plain boolean)."""

    operand: Expression


Expression = Comparison | StartsWith | InList | Exists | And | Or | Not
