"""Compatibility levels and modes: defaults, subject over global, deletes."""

from __future__ import annotations

import pytest

from tests.unit.schema_registry.conftest import avro_record
from yak_schema_registry.errors import (
    OperationNotPermittedError,
    SubjectCompatibilityNotConfiguredError,
    SubjectModeNotConfiguredError,
)
from yak_schema_registry.formats.model import CompatibilityLevel, Mode, SchemaSource, SchemaType
from yak_schema_registry.registry import SchemaRegistry
from yak_schema_registry.settings_store import RegistrySettingsStore


async def test_compatibility_defaults_overrides_and_deletes(
    settings_store: RegistrySettingsStore,
) -> None:
    assert await settings_store.compatibility(None) is CompatibilityLevel.BACKWARD
    assert await settings_store.compatibility("s") is CompatibilityLevel.BACKWARD
    with pytest.raises(SubjectCompatibilityNotConfiguredError) as missing:
        await settings_store.own_compatibility("s")
    assert missing.value.error_code == 40408
    await settings_store.set_compatibility(None, CompatibilityLevel.FULL)
    await settings_store.set_compatibility("s", CompatibilityLevel.NONE)
    assert await settings_store.compatibility("s") is CompatibilityLevel.NONE
    assert await settings_store.compatibility("t") is CompatibilityLevel.FULL
    assert await settings_store.delete_compatibility("s") is CompatibilityLevel.NONE
    assert await settings_store.compatibility("s") is CompatibilityLevel.FULL
    assert await settings_store.delete_compatibility(None) is CompatibilityLevel.FULL
    assert await settings_store.compatibility(None) is CompatibilityLevel.BACKWARD


async def test_modes_and_the_import_guard(
    settings_store: RegistrySettingsStore, registry: SchemaRegistry
) -> None:
    assert await settings_store.mode(None) is Mode.READWRITE
    with pytest.raises(SubjectModeNotConfiguredError) as missing:
        await settings_store.own_mode("s")
    assert missing.value.error_code == 40409
    await settings_store.set_mode("s", Mode.READONLY)
    assert await settings_store.mode("s") is Mode.READONLY
    assert await settings_store.mode("t") is Mode.READWRITE
    assert await settings_store.delete_mode("s") is Mode.READONLY
    text = avro_record({"name": "a", "type": "int"})
    await registry.register("s", SchemaSource(SchemaType.AVRO, text))
    with pytest.raises(OperationNotPermittedError, match="force"):
        await settings_store.set_mode(None, Mode.IMPORT)
    await settings_store.set_mode("t", Mode.IMPORT)  # t has no versions
    await settings_store.set_mode(None, Mode.IMPORT, force=True)
    assert await settings_store.mode("s") is Mode.IMPORT
