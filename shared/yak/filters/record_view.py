"""What a filter reads from a record, and how it reads it cheaply.

``FilterRecord`` is the record view: anything with ``timestamp``, ``key``, ``value`` and
``headers`` attributes shaped like ``yak.record.Record``'s. The decoder's ``Record`` satisfies
it as it is, as does the SDK's ``ConsumerRecord``: a consume path hands the filter the records
it decoded anyway and builds nothing per record.

Reading, per field:

* key, the whole value, a header: the raw ``bytes`` (or ``None``), never decoded. Text is
  compared as UTF-8 bytes against the literal's UTF-8 encoding, which orders exactly as Python
  orders ``str`` (by code point) — UTF-8's design guarantees it — and costs no decoding.
* a header: the first header of that name, found by a scan of the record's headers tuple
  (no dict is built; records carry a handful of headers at most).
* a value path: the value parsed with orjson, at most once per record however many
  predicates use it (``JsonValues`` keeps the last record's parse), then walked step by step.
  A null value, a value that is not JSON (or not UTF-8), and a path that is absent all give
  ``MISSING``.

``JsonValues`` is the one mutable object: its slot holds one ``(raw value, parsed)`` pair and
is replaced whole, so threads sharing a compiled filter can at worst parse twice, never read
another record's parse. It keeps the last value alive until the next record replaces it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

import orjson

from yak.filters.expression import PathStep

__all__ = ["MISSING", "FilterRecord", "JsonValues", "first_header", "walk"]


class _Missing:
    """The type of ``MISSING``: a field that the record does not have."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


#: A field the record does not have (distinct from JSON ``null``, which is ``None``).
MISSING: Final = _Missing()


class FilterRecord(Protocol):
    """The record view a filter reads (``yak.record.Record`` is one)."""

    @property
    def timestamp(self) -> int: ...

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...

    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...


def first_header(headers: Sequence[tuple[str, bytes | None]], name: str) -> bytes | None:
    """The value of the first header called ``name``; ``None`` when absent or null."""
    for header, value in headers:
        if header == name:
            return value
    return None


class JsonValues:
    """A record's value parsed as JSON, parsed once per record (see the module doc)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[bytes | None, object] = (None, MISSING)

    def of(self, record: FilterRecord) -> object:
        """The parsed value of ``record``, or ``MISSING`` (null, not JSON, not UTF-8)."""
        raw = record.value
        last = self._last
        if last[0] is raw and raw is not None:
            return last[1]
        if raw is None:
            return MISSING
        try:
            parsed: object = orjson.loads(raw)
        except orjson.JSONDecodeError:
            parsed = MISSING
        self._last = (raw, parsed)
        return parsed


def walk(document: object, path: tuple[PathStep, ...]) -> object:
    """The element of ``document`` at ``path``, or ``MISSING`` if any step does not exist."""
    for step in path:
        if type(step) is str:
            if type(document) is not dict:
                return MISSING
            document = document.get(step, MISSING)
        else:
            if type(document) is not list or step >= len(document):  # type: ignore[operator]
                return MISSING
            document = document[step]  # type: ignore[index]
    return document
