"""Confluent's request and response bodies, and the conversions to and from domain values.

Field names are Confluent's (``schemaType``, ``compatibilityLevel``, ``is_compatible`` ...).
Requests ignore fields they do not know (Confluent's clients send ``metadata`` and
``ruleSet``, which Yak does not keep); responses leave out what Confluent leaves out:
``schemaType`` for AVRO, ``references`` when there are none.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from yak_schema_registry.errors import InvalidVersionError
from yak_schema_registry.formats.model import LATEST, Reference, SchemaSource, SchemaType
from yak_schema_registry.registry import Registered
from yak_schema_registry.storage import StoredSchema

__all__ = [
    "MEDIA_TYPE",
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
    "error_responses",
    "parse_version",
    "schema_response",
    "version_response",
]

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryJSONResponse(JSONResponse):
    """JSON with Confluent's content type."""

    media_type = MEDIA_TYPE


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ReferenceBody(_Body):
    name: Annotated[str, Field(min_length=1)]
    subject: Annotated[str, Field(min_length=1)]
    version: int


class SchemaBody(_Body):
    """A schema to register, look up or test."""

    schema_: Annotated[str, Field(alias="schema")]
    schemaType: str | None = None  # noqa: N815 (Confluent's name)
    references: list[ReferenceBody] = []
    #: IMPORT mode only: the id (and version) the schema keeps.
    id: int | None = None
    version: int | None = None

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


class ConfigBody(_Body):
    compatibility: str | None = None
    compatibilityLevel: str | None = None  # noqa: N815


class ConfigResponse(BaseModel):
    compatibilityLevel: str  # noqa: N815


class ConfigUpdate(BaseModel):
    compatibility: str


class ModeBody(_Body):
    mode: str


class ErrorBody(BaseModel):
    """Confluent's error body (``api.errors``)."""

    error_code: int
    message: str


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error statuses a router's routes answer."""
    return {status: {"model": ErrorBody, "description": _ERRORS[status]} for status in statuses}


_ERRORS = {
    404: "Subject (40401), version (40402) or schema (40403) not found, or a delete or "
    "setting in the wrong state (40404-40409)",
    409: "Incompatible with the subject's compatibility level (409)",
    422: "Invalid schema (42201), version (42202), level (42203), mode (42204), operation "
    "not permitted (42205), reference exists (42206), or a body of the wrong shape (422)",
    500: "The metadata store failed (50001)",
}


def parse_version(text: str) -> int:
    """A version in a path: ``latest``, ``-1`` (the same) or a positive integer; else 42202."""
    if text == "latest":
        return LATEST
    try:
        version = int(text)
    except ValueError:
        version = 0
    if version == LATEST or 1 <= version <= 2**31 - 1:
        return version
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
