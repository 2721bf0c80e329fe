"""The registry's transactions on a real etcd: two registries, two connections, one cluster.

What the in-memory store cannot prove: etcd itself decides the compare-and-swap races (ids,
versions) and the prefix compare that keeps a referenced version from a permanent delete.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import pytest

from yak.etcd_server import EmbeddedEtcd
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace
from yak_schema_registry.deletions import Deletions
from yak_schema_registry.errors import ReferenceExistsError
from yak_schema_registry.formats.model import (
    CompatibilityLevel,
    Reference,
    SchemaSource,
    SchemaType,
)
from yak_schema_registry.registry import SchemaRegistry
from yak_schema_registry.settings_store import RegistrySettingsStore
from yak_schema_registry.storage import SchemaStorage

pytestmark = pytest.mark.integration


def avro(name: str, *fields: dict[str, object]) -> SchemaSource:
    text = json.dumps({"type": "record", "name": name, "fields": list(fields)})
    return SchemaSource(SchemaType.AVRO, text)


@pytest.fixture
async def registries(etcd: EmbeddedEtcd) -> AsyncIterator[list[SchemaRegistry]]:
    """Two registries of one fresh cluster id, each on its own etcd connection."""
    root = Keyspace(f"sr-{uuid.uuid4().hex[:12]}").root
    stores = [EtcdMetadataStore.from_url(etcd.endpoint) for _ in range(2)]
    try:
        registries = []
        for store in stores:
            storage = SchemaStorage(store, root)
            registries.append(SchemaRegistry(storage, RegistrySettingsStore(storage)))
        yield registries
    finally:
        for store in stores:
            await store.aclose()


async def test_racing_registries_hand_out_distinct_ids_and_versions(
    registries: list[SchemaRegistry],
) -> None:
    first, second = registries
    await first.settings.set_compatibility(None, CompatibilityLevel.NONE)
    sources = [avro(f"R{i}", {"name": "a", "type": "int"}) for i in range(10)]
    ids = await asyncio.gather(
        *(registries[i % 2].register("s", source) for i, source in enumerate(sources))
    )
    assert sorted(ids) == list(range(1, 11))
    records = await second.versions("s")
    assert [r.version for r in records] == list(range(1, 11))
    # The same schema registered on both at once: one version, one id.
    again = list(
        await asyncio.gather(first.register("t", sources[0]), second.register("t", sources[0]))
    )
    assert again == [ids[0], ids[0]]
    assert [r.version for r in await first.versions("t")] == [1]


async def test_a_referenced_version_survives_a_permanent_delete(
    registries: list[SchemaRegistry],
) -> None:
    first, second = registries
    await first.register("address", avro("Address", {"name": "a", "type": "int"}))
    user = SchemaSource(
        SchemaType.AVRO,
        json.dumps(
            {"type": "record", "name": "User", "fields": [{"name": "home", "type": "Address"}]}
        ),
        (Reference("Address", "address", 1),),
    )
    user_id = await second.register("user", user)
    deletions = Deletions(first.storage, first.settings)
    with pytest.raises(ReferenceExistsError):
        await deletions.delete_subject("address", permanent=False)
    assert await first.storage.referenced_by("address", 1) == [user_id]
    await deletions.delete_subject("user", permanent=False)
    await deletions.delete_subject("user", permanent=True)
    assert await first.storage.referenced_by("address", 1) == []
    assert await deletions.delete_subject("address", permanent=False) == [1]
    assert await deletions.delete_subject("address", permanent=True) == [1]
