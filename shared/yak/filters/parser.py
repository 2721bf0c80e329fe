"""Text to syntax tree: ``parse_filter`` and the translation of lark's errors into Yak's.

Order of checks, cheapest first: the text's length (``MAX_FILTER_LENGTH``, before anything
else, so a megabyte of filter costs one ``len``); then the LALR parse, during which
``TreeBuilder`` checks the node count and the nesting depth at every reduction. A bounded text
means a bounded token count, so the parse itself is bounded too (about a millisecond for the
longest filter on this project's machines).

Every failure is an ``InvalidFilterError`` (``INVALID_FILTER``) or ``FilterTooLargeError``
(``FILTER_TOO_LARGE``) whose message names line and column and what was expected, and whose
details carry ``position`` (0-based offset into the text), ``line``, ``column`` (1-based).

The lark parser is built once per process, on first use (building it compiles the grammar's
tables: tens of milliseconds); parsing with it is safe from any thread.
"""

from __future__ import annotations

from functools import cache
from typing import cast

from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from yak.errors import FilterTooLargeError, InvalidFilterError
from yak.filters.expression import MAX_FILTER_LENGTH, Expression
from yak.filters.grammar import GRAMMAR, TERMINAL_NAMES, TreeBuilder

__all__ = ["parse_filter"]


@cache
def _parser() -> Lark:
    return Lark(GRAMMAR, parser="lalr", lexer="contextual", transformer=TreeBuilder())


def parse_filter(text: str) -> Expression:
    """The syntax tree of ``text``; raises ``InvalidFilterError`` or ``FilterTooLargeError``."""
    if len(text) > MAX_FILTER_LENGTH:
        raise FilterTooLargeError(
            f"filter is {len(text)} characters long, more than {MAX_FILTER_LENGTH}",
            limit="length",
            maximum=MAX_FILTER_LENGTH,
            length=len(text),
        )
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(text, exc) from None
    # The inline TreeBuilder's ``start`` returns the Expression; lark's annotation says Tree.
    return cast(Expression, tree)


def _syntax_error(text: str, exc: UnexpectedInput) -> InvalidFilterError:
    if isinstance(exc, UnexpectedToken) and exc.token.type == "$END":
        position, found = len(text.rstrip()), "end of the filter"
        expected = exc.expected
    elif isinstance(exc, UnexpectedToken):
        position, found = exc.token.start_pos or 0, _quoted(exc.token.value)
        expected = exc.expected
    elif isinstance(exc, UnexpectedCharacters):
        position = exc.pos_in_stream or 0
        found = _quoted(text[position])
        expected = exc.allowed
    else:  # UnexpectedEOF: the LALR parser reports the end as a $END token instead
        position, found, expected = len(text), "end of the filter", set()
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    wanted = _expected(expected)
    message = f"unexpected {found} at line {line}, column {column}"
    if wanted:
        message += ": expected " + _one_of(wanted)
    return InvalidFilterError(message, position=position, line=line, column=column, expected=wanted)


def _quoted(value: str) -> str:
    shown = value if len(value) <= 20 else value[:20] + "..."
    return repr(shown)


def _expected(terminals: set[str] | frozenset[str]) -> list[str]:
    return sorted({TERMINAL_NAMES.get(name, name) for name in terminals})


def _one_of(names: list[str]) -> str:
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " or " + names[-1]
