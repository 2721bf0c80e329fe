"""What of an Avro record schema fastavro's writer does not check itself.

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

``unchecked(schema)`` is the top-level record with only the fields that must still be
validated; the record keeps its name, so its own checks (a mapping; fastavro's ``-type`` key)
stay. A value that passes it and that the writer then writes is one the full validator
accepts. ``None`` when there is nothing to drop (not a record, or every field kept): validate
with the whole schema. A field naming a type defined elsewhere (``"Kind"``) is kept; a kept
field naming a type defined in a dropped one makes the result unparsable, and the caller then
validates with the whole schema. Pure.
"""

from __future__ import annotations

from typing import Any

__all__ = ["unchecked"]


def _writer_checked(field_type: object) -> bool:
    if isinstance(field_type, list):  # a union: the writer validates the branch it picks
        return True
    if isinstance(field_type, dict):
        kind: object = field_type.get("type")
        return "logicalType" not in field_type and kind in {"string", "enum"}
    return field_type == "string"


def unchecked(schema: Any) -> dict[str, Any] | None:
    """The record ``schema`` (JSON, not parsed) less the fields its writer checks, or None."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return None
    fields = schema.get("fields")
    if not isinstance(fields, list):
        return None
    kept = [f for f in fields if not (isinstance(f, dict) and _writer_checked(f.get("type")))]
    if len(kept) == len(fields):
        return None
    return {**schema, "fields": kept}
