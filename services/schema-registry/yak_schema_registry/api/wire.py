"""Confluent's request and response bodies, and the conversions to and from domain values.

Field names are Confluent's (``schemaType``, ``compatibilityLevel``, ``is_compatible`` ...).
Requests ignore fields they do not know (Confluent's clients send ``metadata`` and
``ruleSet``, which Yak does not keep); responses leave out what Confluent leaves out:
``schemaType`` for AVRO, ``references`` when there are none.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import Path
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from yak_schema_registry.errors import InvalidVersionError
from yak_schema_registry.formats.model import (
    LATEST,
    CompatibilityLevel,
    Mode,
    Reference,
    SchemaSource,
    SchemaType,
)
from yak_schema_registry.registry import Registered
from yak_schema_registry.storage import StoredSchema

__all__ = [
    "MAX_VERSION",
    "MEDIA_TYPE",
    "VERSION_PATTERN",
    "CompatibilityCheck",
    "ConfigBody",
    "ConfigResponse",
    "ConfigUpdate",
    "ErrorBody",
    "ModeBody",
    "ReferenceBody",
    "RegisterResponse",
    "RegistryJSONResponse",
    "SchemaBody",
    "SchemaResponse",
    "SubjectVersion",
    "SubjectVersionResponse",
    "VersionPath",
    "error_responses",
    "parse_version",
    "schema_response",
    "version_response",
]

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"

#: The largest version (and schema id): Confluent's are Java ints.
MAX_VERSION = 2**31 - 1
#: What ``parse_version`` accepts: ``latest``, ``-1`` or 1 to 2^31-1 (2147483647), digit by
#: digit so that the OpenAPI document states exactly the versions the server takes.
VERSION_PATTERN = (
    "^(latest|-1|[1-9][0-9]{0,8}|1[0-9]{9}|20[0-9]{8}|21[0-3][0-9]{7}|214[0-6][0-9]{6}"
    "|2147[0-3][0-9]{5}|21474[0-7][0-9]{4}|214748[0-2][0-9]{3}|2147483[0-5][0-9]{2}"
    "|21474836[0-3][0-9]|214748364[0-7])$"
)

#: A version in a path, checked by ``parse_version`` (42202), its pattern in the document.
VersionPath = Annotated[
    str,
    Path(
        description="A version number, or `latest` (also `-1`)",
        json_schema_extra={"pattern": VERSION_PATTERN},
    ),
]


class RegistryJSONResponse(JSONResponse):
    """JSON with Confluent's content type."""

    media_type = MEDIA_TYPE


class _Body(BaseModel):
    """A request body: unknown fields ignored; strict types, as the document states them (a
    JSON ``false`` is not the integer 0, nor ``1`` the string ``"1"``)."""

    model_config = ConfigDict(extra="ignore", strict=True)


class ReferenceBody(_Body):
    name: Annotated[str, Field(min_length=1)]
    subject: Annotated[str, Field(min_length=1)]
    version: int


class SchemaBody(_Body):
    """A schema to register, look up or test."""

    #: An example a generated client or a test can register as it is (Avro's ``string``).
    schema_: Annotated[str, Field(alias="schema", examples=['"string"'])]
    schemaType: str | None = None  # noqa: N815 (Confluent's name)
    references: list[ReferenceBody] = []
    #: IMPORT mode only: the id (and version) the schema keeps, Confluent's positive int32s.
    id: Annotated[int | None, Field(ge=1, le=MAX_VERSION)] = None
    version: Annotated[int | None, Field(ge=1, le=MAX_VERSION)] = None

    def source(self) -> SchemaSource:
        references = tuple(Reference(r.name, r.subject, r.version) for r in self.references)
        return SchemaSource(SchemaType.of(self.schemaType), self.schema_, references)


class RegisterResponse(BaseModel):
    id: int


class SchemaResponse(BaseModel):
    schema_: Annotated[str, Field(alias="schema")]
    schemaType: str | None = None  # noqa: N815
    references: list[ReferenceBody] | None = None


class SubjectVersionResponse(SchemaResponse):
    subject: str
    version: int
    id: int


class SubjectVersion(BaseModel):
    subject: str
    version: int


class CompatibilityCheck(BaseModel):
    is_compatible: bool
    messages: list[str] | None = None


_LEVEL = {"type": "string", "enum": [level.value for level in CompatibilityLevel]}
#: A level, or null for none (``config_routes._level`` skips a null field).
_LEVEL_OR_NULL = WithJsonSchema({"anyOf": [_LEVEL, {"type": "null"}]})


def _given(field: str) -> dict[str, Any]:
    return {"required": [field], "properties": {field: {"type": "string"}}}


class ConfigBody(_Body):
    """A level to set; Confluent's clients send ``compatibility`` (any case is taken). One of
    the two fields is needed, not null (``config_routes._level``: 42203 without either)."""

    model_config = ConfigDict(
        json_schema_extra={"anyOf": [_given("compatibility"), _given("compatibilityLevel")]}
    )
    compatibility: Annotated[str | None, _LEVEL_OR_NULL] = None
    compatibilityLevel: Annotated[str | None, _LEVEL_OR_NULL] = None  # noqa: N815


class ConfigResponse(BaseModel):
    compatibilityLevel: str  # noqa: N815


class ConfigUpdate(BaseModel):
    compatibility: str


class ModeBody(_Body):
    mode: Annotated[str, Field(json_schema_extra={"enum": [m.value for m in Mode]})]


class ErrorBody(BaseModel):
    """Confluent's error body (``api.errors``)."""

    error_code: int
    message: str


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error statuses a router's routes answer."""
    return {status: {"model": ErrorBody, "description": _ERRORS[status]} for status in statuses}


_ERRORS = {
    400: "A body that is not JSON (400)",
    404: "Subject (40401), version (40402) or schema (40403) not found, or a delete or "
    "setting in the wrong state (40404-40409)",
    409: "Incompatible with the subject's compatibility level (409)",
    422: "Invalid schema (42201), version (42202), level (42203), mode (42204), operation "
    "not permitted (42205), reference exists (42206), or a body of the wrong shape (422)",
    500: "The metadata store failed (50001)",
}


def parse_version(text: str) -> int:
    """A version in a path: ``latest``, ``-1`` (the same) or a positive integer; else 42202."""
    if re.fullmatch(VERSION_PATTERN, text):
        return LATEST if text == "latest" else int(text)
    raise InvalidVersionError(
        f"The specified version '{text}' is not a valid version id. Allowed values are between "
        '[1, 2^31-1] and the string "latest"'
    )


def _fields(stored: StoredSchema) -> dict[str, object]:
    fields: dict[str, object] = {"schema": stored.text}
    if stored.schema_type is not SchemaType.AVRO:
        fields["schemaType"] = stored.schema_type.value
    if stored.references:
        fields["references"] = [ref._asdict() for ref in stored.references]
    return fields


def schema_response(stored: StoredSchema) -> dict[str, object]:
    return _fields(stored)


def version_response(registered: Registered) -> dict[str, object]:
    record = registered.record
    head = {"subject": record.subject, "version": record.version, "id": record.schema_id}
    return head | _fields(registered.schema)
