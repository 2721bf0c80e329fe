"""The registry on an in-memory metadata store: its parts, and its app behind an ASGI client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping

import httpx
import pytest

from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak_schema_registry.app import create_app
from yak_schema_registry.deletions import Deletions
from yak_schema_registry.registry import SchemaRegistry
from yak_schema_registry.settings import RegistrySettings
from yak_schema_registry.settings_store import RegistrySettingsStore
from yak_schema_registry.storage import SchemaStorage


def avro_record(*fields: Mapping[str, object], name: str = "User") -> str:
    """An Avro record schema's text with ``fields``."""
    return json.dumps({"type": "record", "name": name, "fields": list(fields)})


@pytest.fixture
async def store() -> AsyncIterator[MemoryMetadataStore]:
    memory = MemoryMetadataStore()
    try:
        yield memory
    finally:
        await memory.aclose()


@pytest.fixture
def storage(store: MemoryMetadataStore) -> SchemaStorage:
    return SchemaStorage(store, Keyspace("unit").root)


@pytest.fixture
def settings_store(storage: SchemaStorage) -> RegistrySettingsStore:
    return RegistrySettingsStore(storage)


@pytest.fixture
def registry(storage: SchemaStorage, settings_store: RegistrySettingsStore) -> SchemaRegistry:
    return SchemaRegistry(storage, settings_store)


@pytest.fixture
def deletions(storage: SchemaStorage, settings_store: RegistrySettingsStore) -> Deletions:
    return Deletions(storage, settings_store)


@pytest.fixture
async def client(store: MemoryMetadataStore) -> AsyncIterator[httpx.AsyncClient]:
    """Confluent's API of an app on ``store`` (cluster ``unit``)."""
    app = create_app(RegistrySettings(cluster_id="unit"), store=store)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://registry") as http:
            yield http
