"""``/subjects``: register, look up, read and delete a subject's versions."""

from __future__ import annotations

from fastapi import APIRouter

from yak_schema_registry.api.schema_routes import raw_schema
from yak_schema_registry.api.wire import (
    RegisterResponse,
    SchemaBody,
    SubjectVersionResponse,
    VersionPath,
    error_responses,
    parse_version,
    version_response,
)
from yak_schema_registry.deletions import Deletions
from yak_schema_registry.registry import SchemaRegistry

__all__ = ["subject_router"]


def subject_router(registry: SchemaRegistry, deletions: Deletions) -> APIRouter:
    router = APIRouter(
        prefix="/subjects", tags=["subjects"], responses=error_responses(400, 404, 409, 422, 500)
    )

    @router.get("")
    async def list_subjects(subjectPrefix: str = "", deleted: bool = False) -> list[str]:  # noqa: N803
        return await registry.subjects(prefix=subjectPrefix, deleted=deleted)

    @router.get("/{subject}/versions")
    async def list_versions(subject: str, deleted: bool = False) -> list[int]:
        return [r.version for r in await registry.versions(subject, deleted=deleted)]

    @router.post("/{subject}/versions")
    async def register(subject: str, body: SchemaBody, normalize: bool = False) -> RegisterResponse:
        schema_id = await registry.register(subject, body.source(), import_id=body.id)
        return RegisterResponse(id=schema_id)

    @router.get(
        "/{subject}/versions/{version}",
        response_model=SubjectVersionResponse,
        response_model_exclude_none=True,
    )
    async def get_version(
        subject: str, version: VersionPath, deleted: bool = False
    ) -> dict[str, object]:
        found = await registry.version(subject, parse_version(version), deleted=deleted)
        return version_response(found)

    @router.get("/{subject}/versions/{version}/schema")
    async def get_version_schema(subject: str, version: VersionPath) -> object:
        found = await registry.version(subject, parse_version(version))
        return raw_schema(found.schema.text)

    @router.get("/{subject}/versions/{version}/referencedby")
    async def referenced_by(subject: str, version: VersionPath) -> list[int]:
        found = await registry.version(subject, parse_version(version))
        return await registry.storage.referenced_by(subject, found.record.version)

    @router.post(
        "/{subject}", response_model=SubjectVersionResponse, response_model_exclude_none=True
    )
    async def lookup(
        subject: str, body: SchemaBody, normalize: bool = False, deleted: bool = False
    ) -> dict[str, object]:
        return version_response(await registry.lookup(subject, body.source(), deleted=deleted))

    @router.delete("/{subject}")
    async def delete_subject(subject: str, permanent: bool = False) -> list[int]:
        return await deletions.delete_subject(subject, permanent=permanent)

    @router.delete("/{subject}/versions/{version}")
    async def delete_version(subject: str, version: VersionPath, permanent: bool = False) -> int:
        number = parse_version(version)
        return await deletions.delete_version(subject, number, permanent=permanent)

    return router
