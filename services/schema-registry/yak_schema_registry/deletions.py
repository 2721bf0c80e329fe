"""Deleting subjects and versions: soft first, then, with ``permanent``, for good.

Confluent's two steps: a soft delete hides a version from reads and compatibility checks but
keeps its number (a later registration gets a higher one); only a soft-deleted version may be
deleted permanently, and not while another schema references it (42206). The schema behind an
id stays readable by id after every version holding it is gone (``storage``). Each step is a
compare-and-swap on the version's key; a version changed by someone else meanwhile is read
again.
"""

from __future__ import annotations

from yak.errors import MetadataStoreError
from yak_schema_registry.errors import (
    OperationNotPermittedError,
    ReferenceExistsError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from yak_schema_registry.formats.model import LATEST, Mode
from yak_schema_registry.settings_store import RegistrySettingsStore
from yak_schema_registry.storage import SchemaStorage, VersionRecord

__all__ = ["Deletions"]

_ATTEMPTS = 20


class Deletions:
    """Soft and permanent deletes of subjects and versions."""

    def __init__(self, storage: SchemaStorage, settings: RegistrySettingsStore) -> None:
        self._storage = storage
        self._settings = settings

    async def delete_subject(self, subject: str, *, permanent: bool) -> list[int]:
        """Delete every version of ``subject``; return their numbers."""
        await self._writable(subject)
        for _ in range(_ATTEMPTS):
            records = await self._storage.versions(subject)
            if not records:
                raise SubjectNotFoundError(f"Subject '{subject}' not found.")
            live = [r for r in records if not r.deleted]
            if permanent and live:
                raise SubjectNotSoftDeletedError(
                    f"Subject '{subject}' was not deleted first before being permanently deleted"
                )
            if not permanent and not live:
                raise SubjectSoftDeletedError(
                    f"Subject '{subject}' was soft deleted. Set permanent=true to delete "
                    "permanently"
                )
            targets = records if permanent else live
            for record in targets:  # refuse before deleting any
                await self._unreferenced(record)
            if all([await self._delete(r, permanent=permanent) for r in targets]):
                if permanent:
                    await self._storage.forget_subject(subject)
                return [r.version for r in targets]
        raise MetadataStoreError(f"could not delete {subject!r}: too much contention")

    async def delete_version(self, subject: str, version: int, *, permanent: bool) -> int:
        """Delete one version (``LATEST``: the newest live one); return its number."""
        await self._writable(subject)
        for _ in range(_ATTEMPTS):
            records = await self._storage.versions(subject)
            if not any(not r.deleted for r in records) and not (permanent and records):
                raise SubjectNotFoundError(f"Subject '{subject}' not found.")
            record = self._pick(records, version, permanent=permanent)
            if permanent and not record.deleted:
                raise VersionNotSoftDeletedError(
                    f"Subject '{subject}' Version {record.version} was not deleted first before "
                    "being permanently deleted"
                )
            if not permanent and record.deleted:
                raise VersionSoftDeletedError(
                    f"Subject '{subject}' Version {record.version} was soft deleted. Set "
                    "permanent=true to delete permanently"
                )
            if await self._delete(record, permanent=permanent):
                if permanent and len(records) == 1:
                    await self._storage.forget_subject(subject)
                return record.version
        raise MetadataStoreError(f"could not delete {subject!r}: too much contention")

    @staticmethod
    def _pick(records: list[VersionRecord], version: int, *, permanent: bool) -> VersionRecord:
        if version == LATEST:
            candidates = records if permanent else [r for r in records if not r.deleted]
            if candidates:
                return candidates[-1]
        else:
            found = next((r for r in records if r.version == version), None)
            if found is not None:
                return found
        raise VersionNotFoundError(f"Version {version} not found.")

    async def _unreferenced(self, record: VersionRecord) -> None:
        referencing = await self._storage.referenced_by(record.subject, record.version)
        if referencing:
            raise ReferenceExistsError(
                f"One or more references exist to the schema {{subject={record.subject}, "
                f"version={record.version}}}: schemas {referencing}"
            )

    async def _delete(self, record: VersionRecord, *, permanent: bool) -> bool:
        """One version; False if it changed meanwhile (read again)."""
        await self._unreferenced(record)
        if not permanent:
            return record.deleted or await self._storage.soft_delete(record)
        stored = await self._storage.schema(record.schema_id)
        references = () if stored is None else stored.references
        return await self._storage.hard_delete(record, references)

    async def _writable(self, subject: str) -> None:
        if await self._settings.mode(subject) is Mode.READONLY:
            raise OperationNotPermittedError(f"Subject {subject} is in read-only mode")
