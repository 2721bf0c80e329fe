"""Avro keys and values: JSON in, Avro binary framed out, and back. Built once per schema id.

Going in, a value is first taken as it is (Karapace's form: a union's value given plainly);
if the schema does not accept it, it is read as Avro's own JSON encoding (Confluent's form: a
union's value as ``{"branch": value}``, bytes and fixed as ISO-8859-1 text) through
``fastavro.json_reader``. ``fastavro``'s validator decides, so nothing its writer would silently
coerce (a float into an int, an int out of range) is written; in a request of several values
it checks, column by column, only the fields the writer does not refuse misfits of itself
(``avro_unchecked``), and any refusal sends the request through the whole check, which names
the misfit (``docs/performance.md``, "Avro produce"). Coming out, values are plain JSON:
unions unwrapped, bytes and fixed as ISO-8859-1 text, decimals as strings, logical dates and
times as ISO 8601 (orjson's). Thread-safe once built: the parsed schema is only read.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from decimal import Decimal
from typing import Any, ClassVar

import fastavro
import orjson
from fastavro.validation import ValidationError, validate, validate_many

from yak_rest_proxy.schemas.avro_calls import WRITE_OPTIONS, write_into
from yak_rest_proxy.schemas.avro_unchecked import UncheckedColumns
from yak_rest_proxy.schemas.errors import InvalidSchemaError, RecordConversionError
from yak_rest_proxy.schemas.schema_type import SchemaType
from yak_rest_proxy.schemas.wire import frame

__all__ = ["AvroSerde", "plain_json"]


def plain_json(value: object) -> object:
    """orjson's fallback for what Avro reads and JSON lacks."""
    if isinstance(value, bytes):
        return value.decode("iso-8859-1")
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


#: Fewer values than this are validated whole, value by value: a column costs one validator
#: call (~1 µs) whatever its length, a value's whole check ~3.6 µs at 12 fields.
_BY_COLUMN_FROM = 4


class AvroSerde:
    """One registered Avro schema's encoder and decoder."""

    __slots__ = ("_columns", "_header", "_named", "_parsed", "schema_id")
    schema_type: ClassVar[SchemaType] = SchemaType.AVRO

    def __init__(self, schema_id: int, text: str) -> None:
        self.schema_id = schema_id
        self._header = frame(schema_id, b"")
        self._named: dict[str, Any] = {}
        try:
            schema = orjson.loads(text)
            self._parsed = fastavro.parse_schema(schema, self._named)
        except (orjson.JSONDecodeError, fastavro.schema.SchemaParseException) as exc:
            raise InvalidSchemaError(f"Invalid Avro schema {schema_id}: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidSchemaError(f"Invalid Avro schema {schema_id}: {exc!r}") from None
        self._columns = UncheckedColumns.of(self._parsed, self._named)

    def encode(self, value: Any, where: str) -> bytes:
        """``value`` framed with this schema; ``RecordConversionError`` if it does not fit."""
        return self.encode_many([value], lambda _: where)[0]

    def encode_many(self, values: list[Any], where: Callable[[int], str]) -> list[bytes]:
        """Each of ``values`` framed (``where(i)`` names the i-th in an error), written into
        one buffer by fastavro's compiled writer (``avro_calls``). First optimistically: the
        fields the writer does not check validated column by column (``avro_unchecked``),
        then all written; if either refuses (or the schema has no such columns), the values
        are validated with the whole schema, each misfit fitted (``_fitted``), and written,
        or the first misfit raises. Only values the full validator accepts are written."""
        if self._columns is not None and len(values) >= _BY_COLUMN_FROM:
            try:
                if self._columns.valid(values):
                    return self._write(values)
            except Exception:  # a refusal, or a logical type's converter failing: named below
                pass
        if not self._all_fit(values):
            values = [self._fitted(value, where(i)) for i, value in enumerate(values)]
        return self._write(values)

    def _all_fit(self, values: list[Any]) -> bool:
        try:
            return bool(validate_many(values, self._parsed, raise_errors=False))
        except Exception:  # a logical type's converter refusing a value (a date from "")
            return False

    def _write(self, values: list[Any]) -> list[bytes]:
        if len(values) == 1:  # v3 encodes one at a time: no slicing
            one = bytearray(self._header)
            write_into(one, values[0], self._parsed, self._named, "", WRITE_OPTIONS)
            return [bytes(one)]
        out, header, parsed, named, ends = bytearray(), self._header, self._parsed, self._named, []
        for value in values:
            out += header
            write_into(out, value, parsed, named, "", WRITE_OPTIONS)
            ends.append(len(out))
        with memoryview(out) as data:
            return [bytes(data[start:end]) for start, end in zip([0, *ends], ends, strict=False)]

    def _fitted(self, value: Any, where: str) -> Any:
        """``value`` as it is written: as given if the schema accepts it, else read as Avro's
        JSON encoding if that is accepted; else ``RecordConversionError`` with the
        validator's first complaints."""
        if self._fits(value):
            return value
        try:
            text = orjson.dumps(value).decode()
            decoded = next(fastavro.json_reader(io.StringIO(text), self._parsed))
        except Exception:  # the JSON reader raises many kinds (IndexError, OverflowError...)
            pass
        else:
            if self._fits(decoded):
                return decoded
        raise RecordConversionError(
            f"{where}: does not match Avro schema {self.schema_id}: {self._complaint(value)}"
        )

    def _fits(self, value: Any) -> bool:
        try:
            return bool(validate(value, self._parsed, raise_errors=False))
        except Exception:  # a logical type's converter refusing the value (a date from "")
            return False

    def _complaint(self, value: Any) -> str:
        try:
            validate(value, self._parsed, raise_errors=True)
        except ValidationError as exc:
            errors: list[object] = list(exc.errors)
            return "; ".join(str(e) for e in errors[:3])
        except Exception as exc:  # a logical type's converter refusing the value
            return repr(exc)
        return "refused"  # pragma: no cover - only values the validator refused get here

    def decode(self, payload: memoryview) -> Any:
        """The JSON value of an Avro payload (the bytes after the 5-byte header)."""
        return fastavro.schemaless_reader(io.BytesIO(payload), self._parsed, None)
