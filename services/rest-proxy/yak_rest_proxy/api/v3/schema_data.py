"""v3 keys and values in the schema formats: which registered schema a record's data names.

A key or value ``{"type": "AVRO" | "JSONSCHEMA" | "PROTOBUF" | absent, "data", "subject"?,
"subject_name_strategy"?, "schema_id"?, "schema_version"?, "schema"?}`` (Confluent's
``ProduceRequestData``) is encoded with, in this order: the schema of ``schema_id``; the
``schema`` text, registered under the subject on first use; the subject's ``schema_version``;
else the subject's latest version. The subject is ``subject`` if given, else ``<topic>-key`` or
``<topic>-value`` (TOPIC_NAME, the only strategy served: RECORD_NAME and TOPIC_RECORD_NAME are
422). Without ``type`` the schema's own type is used (a schema text then needs a type). A
``type`` naming one kind of schema and an id or version of another is 422 / 42205.

``schema_ref`` is pure; ``cached_serde`` never awaits (a known id or inline schema), so a stream
of records with one schema encodes them synchronously after the first; ``resolve`` asks the
registry (``Schemas``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from yak.errors import InvalidRequestError
from yak_rest_proxy.api.v3.errors import UnsupportedFormatError
from yak_rest_proxy.schemas import Schemas, SchemaType, Serde

__all__ = ["SCHEMA_TYPES", "SchemaRef", "cached_serde", "resolve", "schema_ref", "schema_refs"]

SCHEMA_TYPES = frozenset({"AVRO", "JSONSCHEMA", "PROTOBUF"})
_STRATEGIES = frozenset({"TOPIC_NAME", "RECORD_NAME", "TOPIC_RECORD_NAME"})


class SchemaRef(NamedTuple):
    """What a key or value says of its schema."""

    schema_type: SchemaType | None
    subject: str
    schema_id: int | None
    schema_version: int | None
    schema: str | None


def _int(given: object, where: str) -> int | None:
    if given is None:
        return None
    if type(given) is not int or given < 0:
        raise InvalidRequestError(f"{where}: must be a non-negative integer", kind="invalid_body")
    return given


def schema_ref(given: dict[str, Any], topic: str, field: str) -> SchemaRef | None:
    """The schema a key or value (``field``) names; None for BINARY, JSON and STRING."""
    kind = given.get("type")
    if kind is not None and (not isinstance(kind, str) or kind not in SCHEMA_TYPES):
        return None  # not a schema type (a bad one is the caller's to refuse)
    strategy = given.get("subject_name_strategy") or "TOPIC_NAME"
    if not isinstance(strategy, str) or strategy not in _STRATEGIES:
        raise InvalidRequestError(
            f"{field}.subject_name_strategy: {strategy!r} is not TOPIC_NAME, RECORD_NAME or "
            "TOPIC_RECORD_NAME",
            kind="invalid_body",
        )
    subject = given.get("subject")
    if subject is None and strategy != "TOPIC_NAME":
        raise UnsupportedFormatError(
            f"{field}.subject_name_strategy {strategy} is not served; give subject, or use "
            "TOPIC_NAME"
        )
    if subject is not None and not isinstance(subject, str):
        raise InvalidRequestError(f"{field}.subject: must be a string", kind="invalid_body")
    schema = given.get("schema")
    if schema is not None and not isinstance(schema, str):
        raise InvalidRequestError(f"{field}.schema: must be a string", kind="invalid_body")
    schema_type = None if kind is None else SchemaType.of_format(kind)
    if schema is not None and schema_type is None:
        raise InvalidRequestError(f"{field}: a schema needs its type", kind="invalid_body")
    return SchemaRef(
        schema_type,
        subject or f"{topic}-{field}",
        _int(given.get("schema_id"), f"{field}.schema_id"),
        _int(given.get("schema_version"), f"{field}.schema_version"),
        schema,
    )


def schema_refs(body: dict[str, Any], topic: str) -> dict[str, SchemaRef]:
    """The schemas a loaded record's key and value name (``produce_request.load_record``)."""
    refs = {}
    for field in ("key", "value"):
        given = body.get(field)
        ref = None if given is None else schema_ref(given, topic, field)
        if ref is not None:
            refs[field] = ref
    return refs


def cached_serde(schemas: Schemas, ref: SchemaRef) -> Serde | None:
    """The serde of ``ref`` if it is known without asking the registry."""
    if ref.schema_id is not None:
        found = schemas.cached(ref.schema_id)
        if found is not None and ref.schema_type is not None:
            schemas.check_type(found, ref.schema_type)
        return found
    if ref.schema is not None and ref.schema_type is not None:
        return schemas.cached_schema(ref.subject, ref.schema_type, ref.schema)
    return None


async def resolve(schemas: Schemas, ref: SchemaRef) -> Serde:
    """The serde of ``ref``, asking the registry."""
    if ref.schema_id is not None:
        return await schemas.by_id(ref.schema_id, ref.schema_type)
    if ref.schema is not None and ref.schema_type is not None:
        return await schemas.by_schema(ref.subject, ref.schema_type, ref.schema)
    return await schemas.by_version(ref.subject, ref.schema_version, ref.schema_type)
