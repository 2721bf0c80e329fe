"""``/compatibility``, ``/config`` and ``/mode``: test a schema, set levels and modes."""

from __future__ import annotations

from fastapi import APIRouter

from yak_schema_registry.api.wire import (
    CompatibilityCheck,
    ConfigBody,
    ConfigResponse,
    ConfigUpdate,
    ModeBody,
    SchemaBody,
    VersionPath,
    error_responses,
    parse_version,
)
from yak_schema_registry.formats.model import CompatibilityLevel, Mode
from yak_schema_registry.registry import SchemaRegistry
from yak_schema_registry.settings_store import RegistrySettingsStore

__all__ = ["config_router"]


def _check(messages: list[str], verbose: bool) -> CompatibilityCheck:
    return CompatibilityCheck(is_compatible=not messages, messages=messages if verbose else None)


def _level(body: ConfigBody) -> CompatibilityLevel:
    """The level a body sets: both of its fields are checked (42203), ``compatibility`` wins."""
    given = [body.compatibility, body.compatibilityLevel]
    levels = [CompatibilityLevel.of(name) for name in given if name is not None]
    return levels[0] if levels else CompatibilityLevel.of(None)


def config_router(registry: SchemaRegistry, settings: RegistrySettingsStore) -> APIRouter:
    router = APIRouter(tags=["compatibility"], responses=error_responses(400, 404, 422, 500))

    @router.post(
        "/compatibility/subjects/{subject}/versions/{version}",
        response_model=CompatibilityCheck,
        response_model_exclude_none=True,
    )
    async def test_one(
        subject: str, version: VersionPath, body: SchemaBody, verbose: bool = False
    ) -> CompatibilityCheck:
        number = parse_version(version)
        return _check(await registry.test_compatibility(subject, body.source(), number), verbose)

    @router.post(
        "/compatibility/subjects/{subject}/versions",
        response_model=CompatibilityCheck,
        response_model_exclude_none=True,
    )
    async def test_all(subject: str, body: SchemaBody, verbose: bool = False) -> CompatibilityCheck:
        return _check(await registry.test_compatibility(subject, body.source(), None), verbose)

    @router.get("/config")
    async def get_config() -> ConfigResponse:
        level = await settings.compatibility(None)
        return ConfigResponse(compatibilityLevel=level.value)

    @router.put("/config")
    async def put_config(body: ConfigBody) -> ConfigUpdate:
        level = _level(body)
        await settings.set_compatibility(None, level)
        return ConfigUpdate(compatibility=level.value)

    @router.delete("/config")
    async def delete_config() -> ConfigResponse:
        level = await settings.delete_compatibility(None)
        return ConfigResponse(compatibilityLevel=level.value)

    @router.get("/config/{subject}")
    async def get_subject_config(subject: str, defaultToGlobal: bool = False) -> ConfigResponse:  # noqa: N803
        if defaultToGlobal:
            level = await settings.compatibility(subject)
        else:
            level = await settings.own_compatibility(subject)
        return ConfigResponse(compatibilityLevel=level.value)

    @router.put("/config/{subject}")
    async def put_subject_config(subject: str, body: ConfigBody) -> ConfigUpdate:
        level = _level(body)
        await settings.set_compatibility(subject, level)
        return ConfigUpdate(compatibility=level.value)

    @router.delete("/config/{subject}")
    async def delete_subject_config(subject: str) -> ConfigResponse:
        level = await settings.delete_compatibility(subject)
        return ConfigResponse(compatibilityLevel=level.value)

    @router.get("/mode", tags=["mode"])
    async def get_mode() -> ModeBody:
        return ModeBody(mode=(await settings.mode(None)).value)

    @router.put("/mode", tags=["mode"])
    async def put_mode(body: ModeBody, force: bool = False) -> ModeBody:
        mode = Mode.of(body.mode)
        await settings.set_mode(None, mode, force=force)
        return ModeBody(mode=mode.value)

    @router.get("/mode/{subject}", tags=["mode"])
    async def get_subject_mode(subject: str, defaultToGlobal: bool = False) -> ModeBody:  # noqa: N803
        mode = await (settings.mode(subject) if defaultToGlobal else settings.own_mode(subject))
        return ModeBody(mode=mode.value)

    @router.put("/mode/{subject}", tags=["mode"])
    async def put_subject_mode(subject: str, body: ModeBody, force: bool = False) -> ModeBody:
        mode = Mode.of(body.mode)
        await settings.set_mode(subject, mode, force=force)
        return ModeBody(mode=mode.value)

    @router.delete("/mode/{subject}", tags=["mode"])
    async def delete_subject_mode(subject: str) -> ModeBody:
        return ModeBody(mode=(await settings.delete_mode(subject)).value)

    return router
