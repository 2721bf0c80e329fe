"""What of an Avro record schema fastavro's writer does not check itself, validated by column.

Encoding a value costs a validation (``fastavro.validation``) and a write, and validating a
12-field record cost about as much as writing it. Part of that check is done twice: for some
types the writer itself raises on every value the validator refuses. Tried with every kind of
JSON value (``tests/unit/rest_proxy/schemas/test_avro_unchecked.py`` keeps trying), these are

* ``string``: the writer raises on anything but a ``str``;
* an enum: the writer raises on anything but one of its symbols;
* a union: the writer picks the branch with the validator itself, and raises if none fits.

For the other types the writer does *not* refuse but silently coerces what the validator
refuses — a float or a bool into an ``int``/``long`` (1.5 is written as 1), an int beyond 32
bits into an ``int``, anything into a ``boolean`` (its truth) or a ``null`` (nothing), a string
into an ``array`` (its characters) — and logical types go through converters first: those keep
the validator. ``bytes`` keeps it too: no JSON value is bytes, so a bytes field always takes
the full path (Avro's JSON encoding), and the validator sends it there at once.

``UncheckedColumns.of(parsed, named)`` holds the top-level record's kept fields, each as an
array schema: ``valid(values)`` validates a request's values one field (column) at a time
with fastavro's validator — one call per column instead of one per value, which also spares
the validator's per-record work. What fastavro checks of the record itself is checked here
the same way, only narrower: every value a ``dict`` without fastavro's ``-type`` key, and a
missing field read as its default, else None. A request that passes and that the writer then
writes holds only values the full validator accepts. ``of`` answers ``None`` (validate with
the whole schema) for a schema that is not a record, or where a kept field names a record or
fixed type defined in a dropped one (its column does not parse). Pure; immutable once built.
"""

from __future__ import annotations

from typing import Any

import fastavro
from fastavro.validation import validate

__all__ = ["UncheckedColumns"]


def _writer_checked(field_type: object, named: dict[str, Any]) -> bool:
    if isinstance(field_type, list):  # a union: the writer validates the branch it picks
        return True
    if isinstance(field_type, str) and field_type in named:  # a type defined earlier
        field_type = named[field_type]
    if isinstance(field_type, dict):
        kind: object = field_type.get("type")
        return "logicalType" not in field_type and kind in {"string", "enum"}
    return field_type == "string"


def _array_of(field_type: Any, defined: dict[str, Any]) -> Any:
    return fastavro.parse_schema({"type": "array", "items": field_type}, defined)


class UncheckedColumns:
    """See the module docstring."""

    __slots__ = ("_columns",)

    def __init__(self, columns: list[tuple[str, Any, Any]]) -> None:
        self._columns = columns  # (field name, default, parsed array of the field's type)

    @classmethod
    def of(cls, parsed: Any, named: dict[str, Any]) -> UncheckedColumns | None:
        """The columns of a parsed record schema (``named``: its named types), or None."""
        if not isinstance(parsed, dict) or parsed.get("type") != "record":
            return None
        kept = [f for f in parsed["fields"] if not _writer_checked(f["type"], named)]
        defined: dict[str, Any] = {}  # in order: a column may name a type an earlier one defines
        try:
            columns = [(f["name"], f.get("default"), _array_of(f["type"], defined)) for f in kept]
        except (fastavro.schema.SchemaParseException, KeyError, TypeError, ValueError):
            return None
        return cls(columns)

    @property
    def names(self) -> list[str]:
        """The fields validated here, in the schema's order."""
        return [name for name, _, _ in self._columns]

    def valid(self, values: list[Any]) -> bool:
        """Whether every value passes the kept fields' checks (a logical type's converter
        may raise instead of answering False, as in fastavro's own validator)."""
        for value in values:
            if type(value) is not dict or "-type" in value:
                return False
        for name, default, column in self._columns:
            if not validate([v.get(name, default) for v in values], column, raise_errors=False):
                return False
        return True
