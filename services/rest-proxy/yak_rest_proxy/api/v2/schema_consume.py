"""v2 consumers in the schema formats: polled records decoded back to JSON.

Every key and value of an avro, jsonschema or protobuf consumer must be in the schema registry's
wire format with a schema of the consumer's format; the schemas a poll needs are fetched (once per
id, ``Schemas``) before any record is decoded; a registry that cannot be reached is 408 / 40801
and, as for any failure here, the positions go back (below). A record that cannot be decoded — not
framed, an id the registry does not know, a schema of another format, bytes its schema cannot read
— fails the whole read with 500 / 50002 naming its topic, partition and offset, and the instance's
positions go back to the first record of each partition of that poll, so nothing is skipped: the
client sees the same error until it seeks past the record (``POST .../positions``), as a Kafka
client stops at a record it cannot deserialize.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from yak.errors import YakError
from yak.record import Headers
from yak.types import TopicPartition
from yak_rest_proxy.consume.consumer import Consumers, PolledPartition
from yak_rest_proxy.http.content import EmbeddedFormat
from yak_rest_proxy.schemas import (
    InvalidSchemaError,
    RecordDeserializationError,
    Schemas,
    SchemaType,
)
from yak_rest_proxy.schemas.avro_serde import plain_json

__all__ = ["schema_records_body"]


def _decoded(
    schemas: Schemas, polled: list[PolledPartition], expected: SchemaType
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for topic, partition, records in polled:
        for r in records:
            try:
                key = None if r.key is None else schemas.decode_cached(r.key, expected)
                value = None if r.value is None else schemas.decode_cached(r.value, expected)
            except RecordDeserializationError as exc:
                raise RecordDeserializationError(
                    f"cannot read the record at {topic}/{partition}@{r.offset} as "
                    f"{expected.format_name}: {exc.message}; seek past it to go on",
                    topic=topic,
                    partition=partition,
                    offset=r.offset,
                ) from None
            out.append(
                {
                    "topic": topic,
                    "key": key,
                    "value": value,
                    "partition": partition,
                    "offset": r.offset,
                    "timestamp": r.timestamp,
                    "headers": [],
                }
            )
    return out


async def schema_records_body(
    schemas: Schemas,
    consumers: Consumers,
    group: str,
    instance: str,
    polled: list[PolledPartition],
    fmt: EmbeddedFormat,
    headers: Callable[[Headers], list[dict[str, str | None]]],
) -> bytes:
    """The JSON answer of a poll in schema format ``fmt``; see the module docstring.
    ``headers(record_headers)`` renders a record's headers as every v2 answer does."""
    expected = SchemaType.of_format(fmt.value)
    try:
        await schemas.load(
            data for _, _, records in polled for r in records for data in (r.key, r.value)
        )
        rendered = _decoded(schemas, polled, expected)
    except YakError as exc:
        back = {TopicPartition(t, p): records[0].offset for t, p, records in polled}
        if back:
            await consumers.seek(group, instance, back)
        if isinstance(exc, InvalidSchemaError):  # an id the registry does not know
            message = f"cannot read a polled record: {exc.message}"
            raise RecordDeserializationError(message) from None
        raise
    index = 0
    for _, _, records in polled:
        for r in records:
            if r.headers:
                rendered[index]["headers"] = headers(r.headers)
            index += 1
    return orjson.dumps(rendered, default=plain_json)
