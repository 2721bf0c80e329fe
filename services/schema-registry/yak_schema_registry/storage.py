"""The registry's keys in the metadata store (etcd), their values, and its writes.

All keys live under the cluster's root, ``/yak/<cluster-id>/schemas/`` (docs/schema-registry.md)::

    schemas/next-id                                 {"next_id": N}: the next global id
    schemas/ids/<id>                                {"schemaType", "schema", "references"}
    schemas/identities/<sha256>                     {"id": N}: a schema's id by its identity
    schemas/subjects/<subject>/<version>            {"id": N, "deleted": bool}
    schemas/referenced-by/<subject>/<version>/<by-subject>/<by-version>
                                                    {"id": N}: a version that references it
    schemas/config/<subject>, schemas/global/config {"value": "<compatibility level>"}
    schemas/mode/<subject>, schemas/global/mode     {"value": "<mode>"}

The identity digest is the SHA-256 of the schema's type, its format's identity string and its
references (``formats.model.ParsedSchema``).

Subjects are percent-encoded (``urllib.parse.quote`` with no safe character), so a key never
holds a ``/`` of a subject; versions are ten zero-padded digits, so a range read returns them
in order. Values are compact JSON. A schema text is at most ``MAX_SCHEMA_BYTES`` (1 MiB): with
its references it fits etcd's default request limit (1.5 MiB) in the one transaction that
registers it.

Invariants: ``ids/<id>`` never changes once written and is never deleted (records written with
a schema stay readable after its versions are deleted); a new id is written together with
``next-id`` in one transaction that compares ``next-id``'s revision, so two registry
instances never hand out the same id; a version key is written only if absent, so two
instances racing for a subject's next version cannot both win.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from yak.metadata.store import Compare, CompareOp, DeleteOp, MetadataStore, Op, PutOp
from yak_schema_registry.errors import OperationNotPermittedError
from yak_schema_registry.formats.model import ParsedSchema, Reference, SchemaType

__all__ = ["MAX_SCHEMA_BYTES", "SchemaStorage", "StoredSchema", "VersionRecord"]

#: The largest schema text the registry stores (UTF-8 bytes).
MAX_SCHEMA_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class StoredSchema:
    """The schema behind a global id."""

    schema_id: int
    schema_type: SchemaType
    text: str
    references: tuple[Reference, ...]


@dataclass(frozen=True, slots=True)
class VersionRecord:
    """One version of a subject."""

    subject: str
    version: int
    schema_id: int
    deleted: bool


def _dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _digest(schema: ParsedSchema) -> str:
    refs = [list(ref) for ref in schema.references]
    body = json.dumps([schema.schema_type.value, schema.identity, refs], separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


class SchemaStorage:
    """Reads and writes of the ``schemas/`` keys of one cluster."""

    def __init__(self, store: MetadataStore, root: str) -> None:
        self._store = store
        self._root = f"{root}schemas/"

    # -- keys ----------------------------------------------------------------------------------

    def _subject_prefix(self, subject: str) -> str:
        return f"{self._root}subjects/{quote(subject, safe='')}/"

    def _version_key(self, subject: str, version: int) -> str:
        return f"{self._subject_prefix(subject)}{version:010d}"

    def _id_key(self, schema_id: int) -> str:
        return f"{self._root}ids/{schema_id}"

    def _identity_key(self, schema: ParsedSchema) -> str:
        return f"{self._root}identities/{_digest(schema)}"

    def _referenced_by_prefix(self, subject: str, version: int) -> str:
        return f"{self._root}referenced-by/{quote(subject, safe='')}/{version:010d}/"

    def _setting_key(self, kind: str, subject: str | None) -> str:
        if subject is None:
            return f"{self._root}global/{kind}"
        return f"{self._root}{kind}/{quote(subject, safe='')}"

    # -- reads ---------------------------------------------------------------------------------

    async def schema(self, schema_id: int) -> StoredSchema | None:
        kv = await self._store.get(self._id_key(schema_id))
        if kv is None:
            return None
        value = json.loads(kv.value)
        references = tuple(
            Reference(r["name"], r["subject"], r["version"]) for r in value["references"]
        )
        return StoredSchema(schema_id, SchemaType(value["schemaType"]), value["schema"], references)

    async def versions(self, subject: str) -> list[VersionRecord]:
        """Every version of ``subject``, soft-deleted ones included, oldest first."""
        result = await self._store.range_prefix(self._subject_prefix(subject))
        prefix = len(self._subject_prefix(subject))
        return [self._record(subject, kv.key[prefix:], kv.value) for kv in result.kvs]

    async def all_versions(self) -> list[VersionRecord]:
        """Every version of every subject, by subject then version."""
        prefix = f"{self._root}subjects/"
        result = await self._store.range_prefix(prefix)
        records = []
        for kv in result.kvs:
            subject, _, version = kv.key[len(prefix) :].decode().partition("/")
            records.append(self._record(unquote(subject), version.encode(), kv.value))
        return records

    @staticmethod
    def _record(subject: str, version: bytes, value: bytes) -> VersionRecord:
        fields = json.loads(value)
        return VersionRecord(subject, int(version), fields["id"], fields["deleted"])

    async def referenced_by(self, subject: str, version: int) -> list[int]:
        """The ids of the schemas whose versions (soft-deleted ones too) reference this one."""
        prefix = self._referenced_by_prefix(subject, version)
        result = await self._store.range_prefix(prefix)
        return sorted({int(json.loads(kv.value)["id"]) for kv in result.kvs})

    def _reference_ops(
        self, subject: str, version: int, schema_id: int, references: tuple[Reference, ...]
    ) -> list[Op]:
        """The ``referenced-by`` keys a version of ``subject`` holding ``references`` writes."""
        by = f"{quote(subject, safe='')}/{version:010d}"
        value = _dump({"id": schema_id})
        return [
            PutOp(f"{self._referenced_by_prefix(r.subject, r.version)}{by}", value)
            for r in references
        ]

    async def setting(self, kind: str, subject: str | None) -> str | None:
        """A subject's (or, with None, the global) ``config`` or ``mode`` if set."""
        kv = await self._store.get(self._setting_key(kind, subject))
        return None if kv is None else str(json.loads(kv.value)["value"])

    # -- writes --------------------------------------------------------------------------------

    async def put_setting(self, kind: str, subject: str | None, value: str) -> None:
        await self._store.put(self._setting_key(kind, subject), _dump({"value": value}))

    async def delete_setting(self, kind: str, subject: str | None) -> bool:
        return await self._store.delete(self._setting_key(kind, subject))

    async def add_version(
        self, subject: str, version: int, schema: ParsedSchema, import_id: int | None = None
    ) -> int | None:
        """Write ``version`` of ``subject`` holding ``schema``: under the schema's existing id,
        else (with ``import_id``: that id) a new one. None if another writer took the version
        or the id first: read again and retry. An ``import_id`` that holds another schema, or
        a schema registered under another id, is refused (42205)."""
        version_key = self._version_key(subject, version)
        identity_key = self._identity_key(schema)
        known = await self._store.get(identity_key)
        if known is not None:
            schema_id = int(json.loads(known.value)["id"])
            if import_id is not None and import_id != schema_id:
                raise OperationNotPermittedError(
                    f"Schema already registered with id {schema_id} instead of input id {import_id}"
                )
            guards = [
                Compare.absent(version_key),
                Compare.create_revision(identity_key, 0, CompareOp.GREATER),
            ]
            ops: list[Op] = [
                PutOp(version_key, _dump({"id": schema_id, "deleted": False})),
                *self._reference_ops(subject, version, schema_id, schema.references),
            ]
            result = await self._store.txn(guards, ops)
            return schema_id if result.succeeded else None
        counter_key = f"{self._root}next-id"
        counter = await self._store.get(counter_key)
        next_id = 1 if counter is None else int(json.loads(counter.value)["next_id"])
        schema_id = next_id if import_id is None else import_id
        if import_id is not None and await self._store.get(self._id_key(import_id)) is not None:
            raise OperationNotPermittedError(
                f"Overwrite new schema with id {import_id} is not permitted: the id holds "
                "another schema"
            )
        guards = [
            Compare.absent(version_key),
            Compare.absent(identity_key),
            Compare.absent(self._id_key(schema_id)),
            Compare.absent(counter_key)
            if counter is None
            else Compare.mod_revision(counter_key, counter.mod_revision),
        ]
        refs = [
            {"name": r.name, "subject": r.subject, "version": r.version} for r in schema.references
        ]
        stored = {"schemaType": schema.schema_type.value, "schema": schema.text, "references": refs}
        ops = [
            PutOp(counter_key, _dump({"next_id": max(next_id, schema_id + 1)})),
            PutOp(self._id_key(schema_id), _dump(stored)),
            PutOp(identity_key, _dump({"id": schema_id})),
            PutOp(version_key, _dump({"id": schema_id, "deleted": False})),
            *self._reference_ops(subject, version, schema_id, schema.references),
        ]
        result = await self._store.txn(guards, ops)
        return schema_id if result.succeeded else None

    async def soft_delete(self, record: VersionRecord) -> bool:
        """Mark a live version deleted; False if it changed meanwhile."""
        key = self._version_key(record.subject, record.version)
        old = _dump({"id": record.schema_id, "deleted": False})
        new = _dump({"id": record.schema_id, "deleted": True})
        result = await self._store.txn([Compare.value(key, old)], [PutOp(key, new)])
        return result.succeeded

    async def hard_delete(self, record: VersionRecord, references: tuple[Reference, ...]) -> bool:
        """Remove a soft-deleted version (holding a schema with ``references``) unless a
        version references it (then False), with the ``referenced-by`` keys it wrote."""
        key = self._version_key(record.subject, record.version)
        deleted = _dump({"id": record.schema_id, "deleted": True})
        guards = [
            Compare.value(key, deleted),
            Compare.none_under(self._referenced_by_prefix(record.subject, record.version)),
        ]
        by = f"{quote(record.subject, safe='')}/{record.version:010d}"
        ops: list[Op] = [
            DeleteOp(key),
            *(
                DeleteOp(f"{self._referenced_by_prefix(r.subject, r.version)}{by}")
                for r in references
            ),
        ]
        result = await self._store.txn(guards, ops)
        return result.succeeded

    async def forget_subject(self, subject: str) -> None:
        """Drop a subject's own config and mode (after its last version is gone)."""
        ops: list[Op] = [
            DeleteOp(self._setting_key("config", subject)),
            DeleteOp(self._setting_key("mode", subject)),
        ]
        await self._store.txn([], ops)
