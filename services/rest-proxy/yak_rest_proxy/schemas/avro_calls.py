"""fastavro's compiled writer, called per value without its per-call wrapper.

``fastavro.schemaless_writer`` re-reads the parsed schema's named types, builds an options dict
and a scratch ``bytearray`` and copies it into the output for every value: at a 12-field record
that wrapper was a quarter of the writing time (``loadtest/bench_schema_encode.py``). Its
compiled module exposes the function underneath, ``write_data(out, value, schema,
named_schemas, field, options)``, which appends one value to a ``bytearray``; ``write_into``
is that function when fastavro was installed with its compiled modules (every wheel), else a
wrapper of the public writer with the same signature and the same bytes. ``write_data`` is not
in fastavro's documented API: the unit tests check it writes what ``schemaless_writer`` writes,
so an upgrade that changes it fails there, not in production. Pure; no state.
"""

from __future__ import annotations

import importlib
import io
from collections.abc import Callable
from typing import Any

import fastavro

__all__ = ["WRITE_OPTIONS", "WriteInto", "compiled", "write_into"]

#: ``write_data``: (output, value, parsed schema, named schemas, field name, options).
WriteInto = Callable[[bytearray, Any, Any, dict[str, Any], str, dict[str, Any]], None]

#: ``schemaless_writer``'s defaults, as the options ``write_data`` reads.
WRITE_OPTIONS: dict[str, Any] = {
    "strict": False,
    "strict_allow_default": False,
    "disable_tuple_notation": False,
}


def _write_with_public_api(
    out: bytearray,
    value: Any,
    schema: Any,
    named_schemas: dict[str, Any],
    field: str,
    options: dict[str, Any],
) -> None:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, schema, value)
    out += buffer.getbuffer()


def _compiled_write_data() -> WriteInto | None:
    try:
        module = importlib.import_module("fastavro._write")
    except ImportError:  # fastavro built without its C extensions
        return None
    found: WriteInto | None = getattr(module, "write_data", None)
    return found


_COMPILED = _compiled_write_data()
#: fastavro's compiled ``write_data``, or the public writer behind the same signature.
write_into: WriteInto = _COMPILED if _COMPILED is not None else _write_with_public_api


def compiled() -> bool:
    """Whether ``write_into`` is fastavro's compiled function."""
    return _COMPILED is not None
