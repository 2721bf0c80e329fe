"""Server-side record filters: a small expression language over key, headers, timestamp and
JSON value fields, parsed once into a tree of closures and evaluated per record (issue 30).

``compile_filter('value.status == "cancelled" and headers.region startswith "eu-"')`` gives a
``RecordFilter``; ``matches(record)`` tells whether a record passes. Every consume path (group
poll, stateless read, SSE, WebSocket, share groups, the Spark source) takes the same text; the
grammar, the field semantics, what a missing field does, the limits and the error bodies are in
docs/filters.md.

Modules, one concept each:

* ``expression`` — the syntax tree (frozen dataclasses) and the size limits;
* ``grammar`` — the lark LALR(1) grammar and the callbacks that build the tree while parsing;
* ``parser`` — ``parse_filter``: the limits, lark's errors as ``InvalidFilterError`` with
  line, column and position;
* ``render`` — ``render_filter``: a tree back to canonical text;
* ``record_view`` — ``FilterRecord`` (what a filter reads: ``yak.record.Record`` is one),
  header lookup, the once-per-record JSON parse;
* ``predicates`` — one typed closure per predicate;
* ``compiler`` — ``compile_filter`` (LRU-cached by text) and ``RecordFilter``.

Pure: no asyncio, no web framework, no I/O (an import-linter contract checks it).
"""

from yak.filters.compiler import CACHE_SIZE, RecordFilter, compile_expression, compile_filter
from yak.filters.expression import (
    MAX_FILTER_DEPTH,
    MAX_FILTER_LENGTH,
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
    StartsWith,
    TimestampField,
    ValueField,
)
from yak.filters.parser import parse_filter
from yak.filters.record_view import MISSING, FilterRecord
from yak.filters.render import render_filter

__all__ = [
    "CACHE_SIZE",
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_LENGTH",
    "MAX_FILTER_NODES",
    "MISSING",
    "And",
    "Comparison",
    "Exists",
    "Expression",
    "Field",
    "FilterRecord",
    "HeaderField",
    "InList",
    "KeyField",
    "Literal",
    "Not",
    "Op",
    "Or",
    "RecordFilter",
    "StartsWith",
    "TimestampField",
    "ValueField",
    "compile_expression",
    "compile_filter",
    "parse_filter",
    "render_filter",
]
