"""Registering, looking up and testing schemas on an in-memory store."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from tests.unit.schema_registry.conftest import avro_record
from yak.metadata.memory_store import MemoryMetadataStore
from yak_schema_registry.errors import (
    IncompatibleSchemaError,
    InvalidSchemaError,
    OperationNotPermittedError,
    SchemaNotFoundError,
    SubjectNotFoundError,
    VersionNotFoundError,
)
from yak_schema_registry.formats.model import (
    LATEST,
    CompatibilityLevel,
    Mode,
    Reference,
    SchemaSource,
    SchemaType,
)
from yak_schema_registry.registry import SchemaRegistry
from yak_schema_registry.settings_store import RegistrySettingsStore
from yak_schema_registry.storage import MAX_SCHEMA_BYTES, SchemaStorage

A = {"name": "a", "type": "int"}
B = {"name": "b", "type": "string"}
B_DEFAULT = {"name": "b", "type": "string", "default": ""}


def avro(*fields: Mapping[str, object], name: str = "User") -> SchemaSource:
    return SchemaSource(SchemaType.AVRO, avro_record(*fields, name=name))


async def test_ids_are_global_and_versions_count_per_subject(registry: SchemaRegistry) -> None:
    assert await registry.register("users-value", avro(A)) == 1
    assert await registry.register("users-value", avro(A)) == 1  # the same schema again
    assert await registry.register("users-value", avro(A, B_DEFAULT)) == 2
    assert await registry.register("other-value", avro(A)) == 1  # the same id elsewhere
    assert [r.version for r in await registry.versions("users-value")] == [1, 2]
    other = await registry.version("other-value", LATEST)
    assert (other.record.version, other.record.schema_id) == (1, 1)
    assert await registry.subjects() == ["other-value", "users-value"]
    assert await registry.subjects(prefix="users") == ["users-value"]


async def test_an_incompatible_schema_is_refused_and_nothing_is_stored(
    registry: SchemaRegistry, store: MemoryMetadataStore
) -> None:
    await registry.register("s", avro(A))
    before = await store.range_prefix("/yak/unit/")
    with pytest.raises(IncompatibleSchemaError) as refused:
        await registry.register("s", avro(A, B))
    assert refused.value.error_code == 409
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in refused.value.details["messages"][0]
    with pytest.raises(InvalidSchemaError):
        await registry.register("s", SchemaSource(SchemaType.AVRO, "{"))
    after = await store.range_prefix("/yak/unit/")
    assert after.kvs == before.kvs


async def test_the_subject_level_wins_over_the_global_one(
    registry: SchemaRegistry, settings_store: RegistrySettingsStore
) -> None:
    await registry.register("s", avro(A))
    await settings_store.set_compatibility(None, CompatibilityLevel.FORWARD)
    with pytest.raises(IncompatibleSchemaError):
        await registry.register("s", avro(B_DEFAULT))  # drops a, which has no default
    await settings_store.set_compatibility("s", CompatibilityLevel.NONE)
    assert await registry.register("s", avro(B_DEFAULT)) == 2


async def test_concurrent_registrations_get_distinct_ids_and_versions(
    registry: SchemaRegistry, settings_store: RegistrySettingsStore
) -> None:
    await settings_store.set_compatibility(None, CompatibilityLevel.NONE)
    sources = [avro(A, name=f"R{i}") for i in range(8)]
    ids = await asyncio.gather(*(registry.register("s", s) for s in sources))
    assert sorted(ids) == list(range(1, 9))
    records = await registry.versions("s")
    assert [r.version for r in records] == list(range(1, 9))
    assert sorted(r.schema_id for r in records) == sorted(ids)


async def test_a_second_registry_on_the_same_store_sees_every_write(
    registry: SchemaRegistry, store: MemoryMetadataStore
) -> None:
    storage = SchemaStorage(store, "/yak/unit/")
    other = SchemaRegistry(storage, RegistrySettingsStore(storage))
    first = await registry.register("s", avro(A))
    assert await other.register("s", avro(A)) == first
    assert await other.register("t", avro(B)) == first + 1


async def test_lookup_finds_the_version_holding_a_schema(registry: SchemaRegistry) -> None:
    await registry.register("s", avro(A))
    await registry.register("s", avro(A, B_DEFAULT))
    found = await registry.lookup("s", avro(A), deleted=False)
    assert (found.record.version, found.record.schema_id) == (1, 1)
    with pytest.raises(SchemaNotFoundError):
        await registry.lookup("s", avro(B), deleted=False)
    with pytest.raises(SubjectNotFoundError):
        await registry.lookup("nobody", avro(A), deleted=False)


async def test_reads_of_what_does_not_exist(registry: SchemaRegistry) -> None:
    with pytest.raises(SchemaNotFoundError) as schema:
        await registry.schema(7)
    assert schema.value.error_code == 40403
    with pytest.raises(SubjectNotFoundError) as subject:
        await registry.version("s", 1)
    assert subject.value.error_code == 40401
    await registry.register("s", avro(A))
    with pytest.raises(VersionNotFoundError) as version:
        await registry.version("s", 2)
    assert version.value.error_code == 40402


async def test_references_resolve_to_registered_versions(registry: SchemaRegistry) -> None:
    address = SchemaSource(SchemaType.AVRO, avro_record(A, name="Address"))
    await registry.register("address", address)
    user = avro({"name": "home", "type": "Address"})
    with_ref = SchemaSource(user.schema_type, user.text, (Reference("Address", "address", 1),))
    schema_id = await registry.register("user", with_ref)
    stored = await registry.schema(schema_id)
    assert stored.references == (Reference("Address", "address", 1),)
    assert await registry.storage.referenced_by("address", 1) == [schema_id]
    missing = SchemaSource(user.schema_type, user.text, (Reference("Address", "address", 9),))
    with pytest.raises(InvalidSchemaError, match="does not exist"):
        await registry.register("user2", missing)


async def test_test_compatibility_against_one_version_or_the_level(
    registry: SchemaRegistry, settings_store: RegistrySettingsStore
) -> None:
    await registry.register("s", avro(A))
    await registry.register("s", avro(A, B_DEFAULT))
    assert await registry.test_compatibility("s", avro(A, B_DEFAULT), LATEST) == []
    assert await registry.test_compatibility("s", avro(A, B), 1) != []
    # Against version 1 only, even under a transitive level.
    await settings_store.set_compatibility("s", CompatibilityLevel.FORWARD_TRANSITIVE)
    assert await registry.test_compatibility("s", avro(A), 1) == []
    assert await registry.test_compatibility("s", avro(B_DEFAULT), None) != []


async def test_modes_guard_writes(
    registry: SchemaRegistry, settings_store: RegistrySettingsStore
) -> None:
    await settings_store.set_mode("s", Mode.READONLY)
    with pytest.raises(OperationNotPermittedError) as readonly:
        await registry.register("s", avro(A))
    assert readonly.value.error_code == 42205
    with pytest.raises(OperationNotPermittedError, match="IMPORT"):
        await registry.register("t", avro(A), import_id=40)
    await settings_store.set_mode(None, Mode.IMPORT)
    assert await registry.register("t", avro(A), import_id=40) == 40
    await settings_store.set_mode(None, Mode.READWRITE)
    assert await registry.register("u", avro(B)) == 41  # ids go on after the imported one


async def test_a_schema_over_the_size_limit_is_refused(registry: SchemaRegistry) -> None:
    huge = avro({"name": "a", "type": "string", "doc": "x" * MAX_SCHEMA_BYTES})
    with pytest.raises(InvalidSchemaError, match="larger than"):
        await registry.register("s", huge)


async def test_an_import_cannot_move_a_schema_or_overwrite_an_id(
    registry: SchemaRegistry, settings_store: RegistrySettingsStore
) -> None:
    await settings_store.set_mode(None, Mode.IMPORT)
    assert await registry.register("s", avro(A), import_id=10) == 10
    with pytest.raises(OperationNotPermittedError, match="instead of input id 11"):
        await registry.register("t", avro(A), import_id=11)
    with pytest.raises(OperationNotPermittedError, match="id 10"):
        await registry.register("t", avro(B), import_id=10)
    assert await registry.register("t", avro(A), import_id=10) == 10  # the same pair again
