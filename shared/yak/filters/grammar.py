"""The filter grammar (lark, LALR(1)) and the callbacks that build the syntax tree as it parses.

The grammar, in lark's EBNF (docs/filters.md has the reader's version)::

    or_expr    := and_expr ("or" and_expr)*
    and_expr   := not_expr ("and" not_expr)*
    not_expr   := "not" not_expr | "(" or_expr ")" | predicate
    predicate  := field COMPARE literal | field "startswith" STRING
                | field "in" "[" literal ("," literal)* "]" | "exists" "(" field ")"
    field      := WORD step*          -- key | timestamp | value step* | headers step
    step       := "." WORD | "[" STRING "]" | "[" INT "]"
    literal    := STRING | NUMBER | "true" | "false" | "null"

Keywords are lower case. After a ``.`` any word is a name (``value.and`` is the member
``and``): lark's contextual lexer only offers the terminals the parser can take there. Strings
are JSON strings (decoded with orjson, so JSON's escapes and nothing else); numbers are JSON
numbers, an ``int`` unless written with a fraction or an exponent.

``TreeBuilder`` is lark's inline transformer: lark calls it at each LALR reduction, bottom up,
so the tree is built without recursion and the node and depth limits are checked as the parse
goes (each expression travels as a ``_Part`` with its depth and node count). Its errors are
``InvalidFilterError``/``FilterTooLargeError`` at the offending token. Stateless; one instance
serves every parse, from any thread.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import orjson
from lark import Token, Transformer

from yak.errors import FilterTooLargeError, InvalidFilterError
from yak.filters.expression import (
    MAX_FILTER_DEPTH,
    MAX_FILTER_NODES,
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
    PathStep,
    StartsWith,
    TimestampField,
    ValueField,
)

__all__ = ["GRAMMAR", "TERMINAL_NAMES", "TreeBuilder", "error_at"]

GRAMMAR = r"""
start: or_expr
?or_expr: and_expr (_OR and_expr)*
?and_expr: not_expr (_AND not_expr)*
?not_expr: NOT not_expr -> not_
         | LPAR or_expr _RPAR -> parens
         | field COMPARE literal -> compare
         | field _STARTSWITH STRING -> startswith
         | field _IN LSQB literal (_COMMA literal)* _RSQB -> in_
         | EXISTS LPAR field _RPAR -> exists
field: WORD step*
step: _DOT WORD -> name_step
    | LSQB STRING _RSQB -> string_step
    | LSQB INT _RSQB -> index_step
literal: STRING | NUMBER | TRUE | FALSE | NULL

_OR: "or"
_AND: "and"
NOT: "not"
_STARTSWITH: "startswith"
_IN: "in"
EXISTS: "exists"
TRUE: "true"
FALSE: "false"
NULL: "null"
LPAR: "("
_RPAR: ")"
LSQB: "["
_RSQB: "]"
_COMMA: ","
_DOT: "."
COMPARE: "==" | "!=" | "<=" | ">=" | "<" | ">"
WORD: /[A-Za-z_][A-Za-z0-9_-]*/
STRING: /"(?:[^"\\]|\\.)*"/
INT: /0|[1-9][0-9]*/
NUMBER: /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/
%ignore /[ \t\r\n]+/
"""

#: How an error message names each terminal the parser expected.
TERMINAL_NAMES = {
    "_OR": "or",
    "_AND": "and",
    "NOT": "not",
    "_STARTSWITH": "startswith",
    "_IN": "in",
    "EXISTS": "exists",
    "TRUE": "true",
    "FALSE": "false",
    "NULL": "null",
    "LPAR": "(",
    "_RPAR": ")",
    "LSQB": "[",
    "_RSQB": "]",
    "_COMMA": ",",
    "_DOT": ".",
    "COMPARE": "a comparison (== != < <= > >=)",
    "WORD": "a field name",
    "STRING": "a string",
    "INT": "an array index",
    "NUMBER": "a number",
    "$END": "the end of the filter",
}

_OPS = {op.value: op for op in Op}
_FIELD_WORDS = "key, timestamp, value or headers"


class _Part(NamedTuple):
    """An expression under construction: its depth, node count and first token."""

    node: Expression
    depth: int
    nodes: int
    at: Token


def error_at(
    token: Token,
    message: str,
    cls: type[InvalidFilterError] = InvalidFilterError,
    **details: object,
) -> InvalidFilterError:
    """``cls`` saying ``message`` at ``token``'s line and column, its position in details."""
    line, column = token.line or 1, token.column or 1
    return cls(
        f"{message} at line {line}, column {column}",
        position=token.start_pos or 0,
        line=line,
        column=column,
        **details,
    )


def _checked(part: _Part) -> _Part:
    if part.depth > MAX_FILTER_DEPTH:
        raise error_at(
            part.at,
            f"filter nests deeper than {MAX_FILTER_DEPTH} levels",
            FilterTooLargeError,
            limit="depth",
            maximum=MAX_FILTER_DEPTH,
        )
    if part.nodes > MAX_FILTER_NODES:
        raise error_at(
            part.at,
            f"filter has more than {MAX_FILTER_NODES} nodes",
            FilterTooLargeError,
            limit="nodes",
            maximum=MAX_FILTER_NODES,
        )
    return part


def _string(token: Token) -> str:
    try:
        text = orjson.loads(token.value)
    except orjson.JSONDecodeError as exc:
        raise error_at(token, f"invalid string {token.value[:40]}: {exc.msg}") from exc
    assert isinstance(text, str)  # the STRING terminal only matches "..."
    return text


def _number(token: Token) -> int | float:
    text = token.value
    if any(c in text for c in ".eE"):
        number = float(text)
        if not math.isfinite(number):
            raise error_at(token, f"number {text[:40]} is out of range")
        return number
    return int(text)


class TreeBuilder(Transformer[Token, Expression]):
    """Lark callbacks: one per grammar rule, called at each reduction (see the module doc)."""

    def start(self, children: list[_Part]) -> Expression:
        return children[0].node

    def or_expr(self, children: list[_Part]) -> _Part:
        return self._junction(Or, children)

    def and_expr(self, children: list[_Part]) -> _Part:
        return self._junction(And, children)

    @staticmethod
    def _junction(kind: type[And] | type[Or], parts: list[_Part]) -> _Part:
        node = kind(tuple(part.node for part in parts))
        depth = 1 + max(part.depth for part in parts)
        return _checked(_Part(node, depth, 1 + sum(p.nodes for p in parts), parts[0].at))

    def not_(self, children: tuple[Token, _Part]) -> _Part:
        keyword, part = children
        return _checked(_Part(Not(part.node), part.depth + 1, part.nodes + 1, keyword))

    def parens(self, children: tuple[Token, _Part]) -> _Part:
        return children[1]

    def compare(self, children: tuple[tuple[Field, Token], Token, Literal]) -> _Part:
        (field, at), op, literal = children
        return _Part(Comparison(field, _OPS[op.value], literal), 1, 1, at)

    def startswith(self, children: tuple[tuple[Field, Token], Token]) -> _Part:
        (field, at), prefix = children
        return _Part(StartsWith(field, _string(prefix)), 1, 1, at)

    def in_(self, children: list[Any]) -> _Part:
        field_at: tuple[Field, Token] = children[0]
        field, at = field_at
        literals: tuple[Literal, ...] = tuple(children[2:])
        return _checked(_Part(InList(field, literals), 1, 1 + len(literals), at))

    def exists(self, children: tuple[Token, Token, tuple[Field, Token]]) -> _Part:
        keyword, _, (field, _) = children
        return _Part(Exists(field), 1, 1, keyword)

    def literal(self, children: tuple[Token]) -> Literal:
        (token,) = children
        kind = token.type
        if kind == "STRING":
            return _string(token)
        if kind == "NUMBER":
            return _number(token)
        return {"TRUE": True, "FALSE": False, "NULL": None}[kind]

    def name_step(self, children: tuple[Token]) -> tuple[PathStep, Token]:
        return children[0].value, children[0]

    def string_step(self, children: tuple[Token, Token]) -> tuple[PathStep, Token]:
        return _string(children[1]), children[0]

    def index_step(self, children: tuple[Token, Token]) -> tuple[PathStep, Token]:
        return int(children[1].value), children[0]

    def field(self, children: list[Any]) -> tuple[Field, Token]:
        word: Token = children[0]
        steps: list[tuple[PathStep, Token]] = children[1:]
        return _field(word, steps), word


def _field(word: Token, steps: list[tuple[PathStep, Token]]) -> Field:
    name = word.value
    if name == "value":
        return ValueField(tuple(step for step, _ in steps))
    if name == "headers":
        if not steps:
            raise error_at(word, 'headers needs a name: headers.<name> or headers["<name>"]')
        header, at = steps[0]
        if not isinstance(header, str):
            raise error_at(at, "a header is named by a word or a string, not an index")
        if len(steps) > 1:
            raise error_at(steps[1][1], "a header value is text: it has no fields")
        return HeaderField(header)
    if name in ("key", "timestamp"):
        if steps:
            raise error_at(steps[0][1], f"{name} has no fields (only value.<path> has)")
        return KeyField() if name == "key" else TimestampField()
    raise error_at(word, f"unknown field {name!r}: expected {_FIELD_WORDS}")
