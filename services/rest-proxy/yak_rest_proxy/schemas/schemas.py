"""``Schemas``: the proxy's cache of schema encoders/decoders, in front of the registry.

Two maps, filled on first use and never emptied (ids and their schemas never change, and a
``(subject, type, text)`` keeps its id — the registry never reuses or rebinds one):

* schema id → its ``Serde``, built once;
* ``(subject, type, schema text)`` → schema id, for schemas given inline (registered, or
  found, under the subject on first use).

A subject's ``latest`` is asked of the registry every time (it moves); a numbered version is
kept. Concurrent misses of one key share one registry call (a future per key in flight).
Single event loop; ``cached`` and ``decode_cached`` never await, so a hot path that finds its
schema stays synchronous. Without a registry (``client`` None) every lookup raises
``SchemaRegistryNotConfiguredError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import Any, TypeVar

from yak_rest_proxy.schemas.errors import (
    InvalidSchemaError,
    RecordDeserializationError,
    SchemaRegistryNotConfiguredError,
)
from yak_rest_proxy.schemas.registry_client import RegisteredSchema, RegistryClient
from yak_rest_proxy.schemas.serde import SchemaType, Serde, build_serde
from yak_rest_proxy.schemas.wire import NotFramedError, unframe

__all__ = ["Schemas"]

T = TypeVar("T")


class Schemas:
    """See the module docstring."""

    def __init__(self, client: RegistryClient | None) -> None:
        self._client = client
        self._by_id: dict[int, Serde] = {}
        self._ids: dict[tuple[str, SchemaType, str], int] = {}
        self._versions: dict[tuple[str, int], int] = {}
        self._flying: dict[Hashable, asyncio.Future[Any]] = {}

    @property
    def enabled(self) -> bool:
        return self._client is not None

    def check_enabled(self, what: str) -> RegistryClient:
        if self._client is None:
            raise SchemaRegistryNotConfiguredError(
                f"{what} needs a schema registry; this proxy has none configured "
                "(set YAK_SCHEMA_REGISTRY_URL, or run yak up --schema-registry)"
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def _once(self, key: Hashable, fetch: Callable[[], Awaitable[T]]) -> T:
        flying = self._flying.get(key)
        if flying is not None:
            result: T = await flying
            return result
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._flying[key] = future
        try:
            value = await fetch()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning without waiters
            raise
        finally:
            del self._flying[key]
        future.set_result(value)
        return value

    def _keep(self, registered: RegisteredSchema) -> Serde:
        serde = self._by_id.get(registered.schema_id)
        if serde is None:
            serde = build_serde(registered.schema_type, registered.schema_id, registered.text)
            self._by_id[registered.schema_id] = serde
        return serde

    @staticmethod
    def _check_type(registered: RegisteredSchema, expected: SchemaType | None) -> None:
        if expected is not None and registered.schema_type is not expected:
            raise InvalidSchemaError(
                f"schema {registered.schema_id} is a {registered.schema_type.value} schema, "
                f"not {expected.value}"
            )

    def cached(self, schema_id: int) -> Serde | None:
        """The serde of an id already used, without awaiting."""
        return self._by_id.get(schema_id)

    def cached_schema(self, subject: str, schema_type: SchemaType, text: str) -> Serde | None:
        """The serde of a schema given inline and used already, without awaiting."""
        schema_id = self._ids.get((subject, schema_type, text))
        return None if schema_id is None else self._by_id.get(schema_id)

    @staticmethod
    def check_type(serde: Serde, expected: SchemaType) -> None:
        """``InvalidSchemaError`` unless ``serde`` is of type ``expected``."""
        if serde.schema_type is not expected:
            raise InvalidSchemaError(
                f"schema {serde.schema_id} is a {serde.schema_type.value} schema, "
                f"not {expected.value}"
            )

    async def by_id(self, schema_id: int, expected: SchemaType | None = None) -> Serde:
        """The serde of a registered id (of type ``expected`` when given)."""
        client = self.check_enabled("a schema id")
        known = self._by_id.get(schema_id)
        if known is not None:
            if expected is not None:
                self.check_type(known, expected)
            return known
        registered = await self._once(("id", schema_id), lambda: client.by_id(schema_id))
        self._check_type(registered, expected)
        return self._keep(registered)

    async def by_schema(self, subject: str, schema_type: SchemaType, text: str) -> Serde:
        """The serde of a schema given inline, registered under ``subject`` on first use."""
        client = self.check_enabled(f"a {schema_type.value} schema")
        key = (subject, schema_type, text)
        schema_id = self._ids.get(key)
        if schema_id is None:
            schema_id = await self._once(key, lambda: client.register(subject, *key[1:]))
            self._ids[key] = schema_id
        serde = self._by_id.get(schema_id)
        if serde is None:
            serde = self._keep(RegisteredSchema(schema_id, schema_type, text))
        return serde

    async def by_version(
        self, subject: str, version: int | None, expected: SchemaType | None = None
    ) -> Serde:
        """The serde of a subject's version (None: its latest, asked every time)."""
        client = self.check_enabled("a schema subject")
        if version is not None and (subject, version) in self._versions:
            return await self.by_id(self._versions[subject, version], expected)
        wanted: int | str = "latest" if version is None else version
        registered = await self._once(
            ("version", subject, wanted), lambda: client.version(subject, wanted)
        )
        self._check_type(registered, expected)
        if version is not None:
            self._versions[subject, version] = registered.schema_id
        return self._keep(registered)

    async def load(self, framed: Iterable[bytes | None]) -> None:
        """Fetch the schemas of every framed key or value not yet cached (unframed ones are
        left for ``decode_cached`` to report)."""
        missing = set()
        for data in framed:
            if data is None:
                continue
            try:
                schema_id, _ = unframe(data)
            except NotFramedError:
                continue
            if schema_id not in self._by_id:
                missing.add(schema_id)
        for schema_id in sorted(missing):
            await self.by_id(schema_id)

    def decode_cached(self, data: bytes, expected: SchemaType) -> Any:
        """The JSON value of framed ``data`` whose schema is loaded."""
        try:
            schema_id, payload = unframe(data)
        except NotFramedError as exc:
            raise RecordDeserializationError(str(exc)) from None
        serde = self._by_id.get(schema_id)
        if serde is None:  # load() was not called: a bug of the caller
            raise RecordDeserializationError(f"schema {schema_id} is not loaded")
        if serde.schema_type is not expected:
            raise RecordDeserializationError(
                f"the record's schema {schema_id} is not a {expected.value} schema"
            )
        try:
            return serde.decode(payload)
        except RecordDeserializationError:
            raise
        except Exception as exc:  # each library raises its own: a record its schema cannot read
            raise RecordDeserializationError(
                f"cannot read the record with schema {schema_id}: {exc!r}"
            ) from None
