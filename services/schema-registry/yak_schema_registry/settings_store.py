"""Compatibility levels and modes, global and per subject, in the ``schemas/`` keys.

A subject's own setting wins over the global one; the global compatibility level defaults to
BACKWARD and the global mode to READWRITE, as in Confluent's registry. Switching the global
mode to IMPORT needs an empty registry (or ``force``), since imported ids could collide with
ids handed out before.
"""

from __future__ import annotations

from yak_schema_registry.errors import (
    OperationNotPermittedError,
    SubjectCompatibilityNotConfiguredError,
    SubjectModeNotConfiguredError,
)
from yak_schema_registry.formats.model import CompatibilityLevel, Mode
from yak_schema_registry.storage import SchemaStorage

__all__ = ["DEFAULT_COMPATIBILITY", "DEFAULT_MODE", "RegistrySettingsStore"]

DEFAULT_COMPATIBILITY = CompatibilityLevel.BACKWARD
DEFAULT_MODE = Mode.READWRITE
_CONFIG = "config"
_MODE = "mode"


class RegistrySettingsStore:
    """Reads and writes of compatibility levels and modes."""

    def __init__(self, storage: SchemaStorage) -> None:
        self._storage = storage

    async def compatibility(self, subject: str | None) -> CompatibilityLevel:
        """The level in force for ``subject`` (None: the global one)."""
        if subject is not None:
            own = await self._storage.setting(_CONFIG, subject)
            if own is not None:
                return CompatibilityLevel(own)
        stored = await self._storage.setting(_CONFIG, None)
        return DEFAULT_COMPATIBILITY if stored is None else CompatibilityLevel(stored)

    async def own_compatibility(self, subject: str) -> CompatibilityLevel:
        """The subject's own level: 40408 if it has none."""
        own = await self._storage.setting(_CONFIG, subject)
        if own is None:
            raise SubjectCompatibilityNotConfiguredError(
                f"Subject '{subject}' does not have subject-level compatibility configured"
            )
        return CompatibilityLevel(own)

    async def set_compatibility(self, subject: str | None, level: CompatibilityLevel) -> None:
        await self._storage.put_setting(_CONFIG, subject, level.value)

    async def delete_compatibility(self, subject: str | None) -> CompatibilityLevel:
        """Drop a level (the global one falls back to the default); return the one before."""
        before = (
            await self.own_compatibility(subject)
            if subject is not None
            else await self.compatibility(None)
        )
        await self._storage.delete_setting(_CONFIG, subject)
        return before

    async def mode(self, subject: str | None) -> Mode:
        """The mode in force for ``subject`` (None: the global one)."""
        if subject is not None:
            own = await self._storage.setting(_MODE, subject)
            if own is not None:
                return Mode(own)
        stored = await self._storage.setting(_MODE, None)
        return DEFAULT_MODE if stored is None else Mode(stored)

    async def own_mode(self, subject: str) -> Mode:
        """The subject's own mode: 40409 if it has none."""
        own = await self._storage.setting(_MODE, subject)
        if own is None:
            raise SubjectModeNotConfiguredError(f"Subject '{subject}' does not have a mode")
        return Mode(own)

    async def set_mode(self, subject: str | None, mode: Mode, *, force: bool = False) -> None:
        if mode is Mode.IMPORT and not force:
            versions = await self._storage.all_versions()
            if any(subject is None or r.subject == subject for r in versions):
                raise OperationNotPermittedError(
                    "Cannot import since found existing subjects (use force=true)"
                )
        await self._storage.put_setting(_MODE, subject, mode.value)

    async def delete_mode(self, subject: str) -> Mode:
        before = await self.own_mode(subject)
        await self._storage.delete_setting(_MODE, subject)
        return before
