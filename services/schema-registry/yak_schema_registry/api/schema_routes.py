"""``/schemas``: schemas by global id, the subjects and versions that hold one, the types."""

from __future__ import annotations

import json

from fastapi import APIRouter

from yak_schema_registry.api.wire import (
    SchemaResponse,
    SubjectVersion,
    error_responses,
    schema_response,
)
from yak_schema_registry.formats.model import SchemaType
from yak_schema_registry.registry import SchemaRegistry

__all__ = ["raw_schema", "schema_router"]


def schema_router(registry: SchemaRegistry) -> APIRouter:
    router = APIRouter(
        prefix="/schemas", tags=["schemas"], responses=error_responses(400, 404, 422, 500)
    )

    @router.get("/types")
    async def schema_types() -> list[str]:
        return [t.value for t in SchemaType]

    @router.get("/ids/{schema_id}", response_model=SchemaResponse, response_model_exclude_none=True)
    async def get_schema(schema_id: int) -> dict[str, object]:
        return schema_response(await registry.schema(schema_id))

    @router.get("/ids/{schema_id}/schema")
    async def get_schema_text(schema_id: int) -> object:
        return raw_schema((await registry.schema(schema_id)).text)

    @router.get("/ids/{schema_id}/versions")
    async def get_schema_versions(schema_id: int, deleted: bool = False) -> list[SubjectVersion]:
        records = await registry.holders(schema_id, deleted=deleted)
        return [SubjectVersion(subject=r.subject, version=r.version) for r in records]

    @router.get("/ids/{schema_id}/subjects")
    async def get_schema_subjects(schema_id: int, deleted: bool = False) -> list[str]:
        records = await registry.holders(schema_id, deleted=deleted)
        return sorted({r.subject for r in records})

    return router


def raw_schema(text: str) -> object:
    """A schema's text as JSON when it is JSON (Avro, JSON Schema), else as a string."""
    try:
        return json.loads(text)
    except ValueError:
        return text
