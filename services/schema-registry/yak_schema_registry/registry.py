"""The registry's operations: register, look up and test schemas against a subject.

Reads go to the metadata store every time (etcd reads are linearizable), so every registry
instance answers alike the moment a write is acknowledged; only parsed schemas are cached,
by id, since the schema behind an id never changes. Writes are compare-and-swap transactions
(``storage``): a registration that loses a race re-reads the subject and tries again, so two
instances registering at once end with two versions, each checked against the other, or one
version when the schemas are the same.

Single event loop; any number of concurrent requests.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from yak.errors import MetadataStoreError
from yak_schema_registry.errors import (
    IncompatibleSchemaError,
    InvalidSchemaError,
    OperationNotPermittedError,
    SchemaNotFoundError,
    SubjectNotFoundError,
    VersionNotFoundError,
)
from yak_schema_registry.formats.compatibility import check_compatibility, parse_schema
from yak_schema_registry.formats.model import (
    LATEST,
    CompatibilityLevel,
    Mode,
    ParsedSchema,
    Reference,
    SchemaSource,
)
from yak_schema_registry.settings_store import RegistrySettingsStore
from yak_schema_registry.storage import (
    MAX_SCHEMA_BYTES,
    SchemaStorage,
    StoredSchema,
    VersionRecord,
)

__all__ = ["Registered", "SchemaRegistry"]

_ATTEMPTS = 20
_CACHE = 4096


class Registered:
    """A subject's version with its schema: what the version routes return."""

    __slots__ = ("record", "schema")

    def __init__(self, record: VersionRecord, schema: StoredSchema) -> None:
        self.record = record
        self.schema = schema


class SchemaRegistry:
    """Schemas, subjects and versions over one cluster's ``schemas/`` keys."""

    def __init__(self, storage: SchemaStorage, settings: RegistrySettingsStore) -> None:
        self.storage = storage
        self.settings = settings
        self._parsed: OrderedDict[int, ParsedSchema] = OrderedDict()

    # -- schemas -------------------------------------------------------------------------------

    async def schema(self, schema_id: int) -> StoredSchema:
        stored = await self.storage.schema(schema_id)
        if stored is None:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        return stored

    async def holders(self, schema_id: int, *, deleted: bool = False) -> list[VersionRecord]:
        """The subjects' versions that hold ``schema_id``; 40403 if the id is unknown."""
        await self.schema(schema_id)
        records = await self.storage.all_versions()
        return [r for r in records if r.schema_id == schema_id and (deleted or not r.deleted)]

    async def subjects(self, *, prefix: str = "", deleted: bool = False) -> list[str]:
        """Subjects with a live version (or any version, with ``deleted``), in order."""
        records = await self.storage.all_versions()
        found = {r.subject for r in records if (deleted or not r.deleted)}
        return sorted(s for s in found if s.startswith(prefix))

    async def parse(self, source: SchemaSource) -> ParsedSchema:
        """``source`` parsed by its format, its references read from the store first."""
        if len(source.text.encode()) > MAX_SCHEMA_BYTES:
            raise InvalidSchemaError(f"Invalid schema: larger than {MAX_SCHEMA_BYTES} bytes")
        resolved = await self._resolve(source.references, [], set())
        return parse_schema(source, resolved)

    async def _resolve(
        self, references: Sequence[Reference], out: list[tuple[str, str]], seen: set[str]
    ) -> list[tuple[str, str]]:
        """The referenced texts, dependencies first (each name once)."""
        for ref in references:
            if ref.name in seen:
                continue
            seen.add(ref.name)
            record = await self._live_version(ref.subject, ref.version, missing=None)
            if record is None:
                raise InvalidSchemaError(
                    f"Invalid schema: reference {ref.name!r} names {ref.subject!r} version "
                    f"{ref.version}, which does not exist"
                )
            stored = await self.schema(record.schema_id)
            await self._resolve(stored.references, out, seen)
            out.append((ref.name, stored.text))
        return out

    async def _parsed_by_id(self, schema_id: int) -> ParsedSchema:
        cached = self._parsed.get(schema_id)
        if cached is not None:
            self._parsed.move_to_end(schema_id)
            return cached
        stored = await self.schema(schema_id)
        parsed = await self.parse(SchemaSource(stored.schema_type, stored.text, stored.references))
        self._parsed[schema_id] = parsed
        if len(self._parsed) > _CACHE:
            self._parsed.popitem(last=False)
        return parsed

    # -- versions ------------------------------------------------------------------------------

    async def versions(self, subject: str, *, deleted: bool = False) -> list[VersionRecord]:
        """The subject's versions (soft-deleted ones too with ``deleted``); 40401 if none."""
        records = [r for r in await self.storage.versions(subject) if deleted or not r.deleted]
        if not records:
            raise SubjectNotFoundError(f"Subject '{subject}' not found.")
        return records

    async def version(self, subject: str, version: int, *, deleted: bool = False) -> Registered:
        """One version (``LATEST``: the newest live one) with its schema."""
        record = await self._live_version(subject, version, missing="raise", deleted=deleted)
        assert record is not None
        return Registered(record, await self.schema(record.schema_id))

    async def _live_version(
        self, subject: str, version: int, *, missing: str | None, deleted: bool = False
    ) -> VersionRecord | None:
        records = await self.storage.versions(subject)
        visible = [r for r in records if deleted or not r.deleted]
        if version == LATEST:
            found = visible[-1] if visible else None
        else:
            found = next((r for r in visible if r.version == version), None)
        if found is None and missing is not None:
            if not any(not r.deleted for r in records) and not (deleted and records):
                raise SubjectNotFoundError(f"Subject '{subject}' not found.")
            raise VersionNotFoundError(f"Version {version} not found.")
        return found

    # -- register, look up, test -----------------------------------------------------------------

    async def register(
        self, subject: str, source: SchemaSource, *, import_id: int | None = None
    ) -> int:
        """The id of ``source`` under ``subject``: its version's if registered already, else
        a new version's, checked against the subject's compatibility level first."""
        mode = await self.settings.mode(subject)
        if mode is Mode.READONLY:
            raise OperationNotPermittedError(f"Subject {subject} is in read-only mode")
        if import_id is not None and mode is not Mode.IMPORT:
            raise OperationNotPermittedError(
                "Overwrite new schema with id is not permitted outside IMPORT mode."
            )
        new = await self.parse(source)
        for _ in range(_ATTEMPTS):
            records = await self.storage.versions(subject)
            live = [r for r in records if not r.deleted]
            previous = [await self._parsed_by_id(r.schema_id) for r in live]
            for record, old in zip(live, previous, strict=True):
                if old.same_as(new) and import_id in (None, record.schema_id):
                    return record.schema_id
            if mode is not Mode.IMPORT:
                level = await self.settings.compatibility(subject)
                problems = check_compatibility(level, new, previous)
                if problems:
                    raise IncompatibleSchemaError(_incompatible(level, problems), messages=problems)
            version = max((r.version for r in records), default=0) + 1
            schema_id = await self.storage.add_version(subject, version, new, import_id)
            if schema_id is not None:
                return schema_id
        raise MetadataStoreError(f"could not register under {subject!r}: too much contention")

    async def lookup(self, subject: str, source: SchemaSource, *, deleted: bool) -> Registered:
        """The version of ``subject`` that holds ``source``: 40401 / 40403 if none."""
        records = await self.versions(subject, deleted=deleted)
        new = await self.parse(source)
        for record in reversed(records):
            if (await self._parsed_by_id(record.schema_id)).same_as(new):
                return Registered(record, await self.schema(record.schema_id))
        raise SchemaNotFoundError("Schema not found")

    async def test_compatibility(
        self, subject: str, source: SchemaSource, version: int | None
    ) -> list[str]:
        """Why ``source`` breaks the subject's level against ``version`` (None: against the
        versions the level names); empty when it is compatible."""
        new = await self.parse(source)
        level = await self.settings.compatibility(subject)
        if version is None:
            live = [r for r in await self.storage.versions(subject) if not r.deleted]
        else:
            record = await self._live_version(subject, version, missing="raise")
            assert record is not None
            live = [record]
            level = CompatibilityLevel(level.name.removesuffix("_TRANSITIVE"))
        previous = [await self._parsed_by_id(r.schema_id) for r in live]
        return check_compatibility(level, new, previous)


def _incompatible(level: CompatibilityLevel, problems: Sequence[str]) -> str:
    return (
        f"Schema being registered is incompatible with an earlier schema for subject; "
        f"compatibility level {level}: {'; '.join(problems)}"
    )
