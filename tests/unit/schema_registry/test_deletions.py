"""Soft and permanent deletes of subjects and versions."""

from __future__ import annotations

import pytest

from tests.unit.schema_registry.conftest import avro_record
from yak_schema_registry.deletions import Deletions
from yak_schema_registry.errors import (
    ReferenceExistsError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from yak_schema_registry.formats.model import (
    LATEST,
    CompatibilityLevel,
    Reference,
    SchemaSource,
    SchemaType,
)
from yak_schema_registry.registry import SchemaRegistry
from yak_schema_registry.settings_store import RegistrySettingsStore


def avro(name: str) -> SchemaSource:
    return SchemaSource(SchemaType.AVRO, avro_record({"name": "a", "type": "int"}, name=name))


@pytest.fixture
async def two_versions(
    registry: SchemaRegistry, settings_store: RegistrySettingsStore
) -> SchemaRegistry:
    await settings_store.set_compatibility(None, CompatibilityLevel.NONE)
    await registry.register("s", avro("One"))
    await registry.register("s", avro("Two"))
    return registry


async def test_a_soft_deleted_version_is_hidden_but_keeps_its_number(
    two_versions: SchemaRegistry, deletions: Deletions
) -> None:
    assert await deletions.delete_version("s", 1, permanent=False) == 1
    assert [r.version for r in await two_versions.versions("s")] == [2]
    assert [r.version for r in await two_versions.versions("s", deleted=True)] == [1, 2]
    with pytest.raises(VersionSoftDeletedError):
        await deletions.delete_version("s", 1, permanent=False)
    assert await two_versions.register("s", avro("Three")) == 3
    assert (await two_versions.version("s", LATEST)).record.version == 3


async def test_permanent_needs_soft_first(
    two_versions: SchemaRegistry, deletions: Deletions
) -> None:
    with pytest.raises(VersionNotSoftDeletedError) as version:
        await deletions.delete_version("s", 2, permanent=True)
    assert version.value.error_code == 40407
    with pytest.raises(SubjectNotSoftDeletedError) as subject:
        await deletions.delete_subject("s", permanent=True)
    assert subject.value.error_code == 40405
    await deletions.delete_version("s", 2, permanent=False)
    assert await deletions.delete_version("s", 2, permanent=True) == 2
    assert [r.version for r in await two_versions.versions("s", deleted=True)] == [1]
    # The id stays readable: records written with it can still be decoded.
    assert (await two_versions.schema(2)).text.startswith('{"type":"record","name":"Two"')


async def test_deleting_a_subject_soft_then_for_good(
    two_versions: SchemaRegistry, deletions: Deletions, settings_store: RegistrySettingsStore
) -> None:
    await settings_store.set_compatibility("s", CompatibilityLevel.FULL)
    assert await deletions.delete_subject("s", permanent=False) == [1, 2]
    assert await two_versions.subjects() == []
    assert await two_versions.subjects(deleted=True) == ["s"]
    with pytest.raises(SubjectSoftDeletedError):
        await deletions.delete_subject("s", permanent=False)
    assert await deletions.delete_subject("s", permanent=True) == [1, 2]
    assert await two_versions.subjects(deleted=True) == []
    with pytest.raises(SubjectNotFoundError):
        await deletions.delete_subject("s", permanent=True)
    # Its own level went with it.
    assert await settings_store.compatibility("s") is CompatibilityLevel.NONE


async def test_a_referenced_version_cannot_be_deleted(
    registry: SchemaRegistry, deletions: Deletions
) -> None:
    await registry.register("address", avro("Address"))
    user = SchemaSource(
        SchemaType.AVRO,
        avro_record({"name": "home", "type": "Address"}),
        (Reference("Address", "address", 1),),
    )
    await registry.register("user", user)
    with pytest.raises(ReferenceExistsError) as refused:
        await deletions.delete_subject("address", permanent=False)
    assert refused.value.error_code == 42206
    # Once the referencing version is gone for good, the referenced one may go.
    await deletions.delete_subject("user", permanent=False)
    await deletions.delete_subject("user", permanent=True)
    assert await deletions.delete_subject("address", permanent=False) == [1]
