"""Per-principal quota overrides in etcd: ``security/quotas/<principal>``, and their follower.

Value: JSON ``{"produce_bytes_per_s": int | null, "fetch_bytes_per_s": int | null}``; ``null``
(or a missing key) means the proxy's default (``YAK_QUOTA_*_BYTES_PER_S``), 0 unlimited, as
Kafka's ``user`` quota entities override its defaults. ``QuotaStore`` reads and writes etcd
directly (the admin API); ``QuotaOverrides`` keeps every proxy's copy current with one prefix
watch from the load's revision + 1 (``yak.metadata.watched``), so a change takes effect within
milliseconds everywhere, reloading after a compaction and retrying (with what it has) while
etcd is unreachable. A
malformed value is logged and ignored. Single event loop.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Sequence
from typing import NamedTuple

from yak.clock import Clock
from yak.errors import InvalidRequestError, ResourceNotFoundError
from yak.metadata.keyspace import Keyspace
from yak.metadata.store import (
    Compare,
    CompareOp,
    DeleteOp,
    EventKind,
    KeyValue,
    MetadataStore,
    WatchEvent,
)
from yak.metadata.watched import WatchedCopy, WatchedPrefix
from yak.security.acl import user_name

__all__ = ["QuotaConfig", "QuotaOverrides", "QuotaStore", "quota_principal"]

log = logging.getLogger(__name__)


class QuotaConfig(NamedTuple):
    """A principal's quotas in bytes per second (None: the default; 0: unlimited)."""

    produce_bytes_per_s: int | None = None
    fetch_bytes_per_s: int | None = None

    def to_json(self) -> bytes:
        return json.dumps(self._asdict()).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> QuotaConfig:
        data = json.loads(raw)
        values = [data.get(field) for field in cls._fields]
        if not all(v is None or (type(v) is int and v >= 0) for v in values):
            raise ValueError(f"quotas must be null or integers >= 0: {data!r}")
        return cls(*values)


def quota_principal(principal: str) -> str:
    """``principal`` if it is ``User:<name>``, else ``InvalidRequestError``."""
    try:
        user_name(principal)
    except ValueError as exc:
        raise InvalidRequestError(str(exc)) from None
    return principal


def _prefix(keyspace: Keyspace) -> str:
    return f"{keyspace.security_prefix}quotas/"


class QuotaStore:
    """Reads and writes ``security/quotas/`` of one cluster (straight to etcd)."""

    def __init__(self, store: MetadataStore, keyspace: Keyspace) -> None:
        self._store = store
        self._prefix = _prefix(keyspace)

    async def get(self, principal: str) -> QuotaConfig:
        kv = await self._store.get(self._prefix + quota_principal(principal))
        if kv is None:
            raise ResourceNotFoundError(f"no quota override for {principal}", principal=principal)
        return QuotaConfig.from_json(kv.value)

    async def list(self) -> dict[str, QuotaConfig]:
        result = await self._store.range_prefix(self._prefix)
        found = {}
        for kv in result.kvs:
            with contextlib.suppress(ValueError):
                found[kv.key.decode()[len(self._prefix) :]] = QuotaConfig.from_json(kv.value)
        return found

    async def put(self, principal: str, quota: QuotaConfig) -> int:
        """Set the principal's override; return the store revision of the write."""
        return await self._store.put(self._prefix + quota_principal(principal), quota.to_json())

    async def delete(self, principal: str) -> int:
        """Remove the override (``ResourceNotFoundError`` if none); return the revision."""
        key = self._prefix + quota_principal(principal)
        result = await self._store.txn(
            [Compare.create_revision(key, 0, CompareOp.GREATER)], [DeleteOp(key)]
        )
        if not result.succeeded:
            raise ResourceNotFoundError(f"no quota override for {principal}", principal=principal)
        return result.revision


class QuotaOverrides(WatchedCopy):
    """This proxy's copy of every override, following etcd; see the module docstring."""

    def __init__(
        self, store: MetadataStore, keyspace: Keyspace, clock: Clock | None = None
    ) -> None:
        self._prefix = _prefix(keyspace)
        self.overrides: dict[str, QuotaConfig] = {}
        self._watched = WatchedPrefix(
            store, self._prefix, what="quota", load=self._load, apply=self._apply_event, clock=clock
        )

    def _load(self, kvs: Sequence[KeyValue]) -> None:
        self.overrides = {}
        for kv in kvs:
            self._apply(EventKind.PUT, kv.key, kv.value)

    def _apply_event(self, event: WatchEvent) -> None:
        self._apply(event.kind, event.key, event.value)

    def _apply(self, kind: EventKind, key: bytes, value: bytes) -> None:
        principal = key.decode()[len(self._prefix) :]
        self.overrides.pop(principal, None)
        if kind is EventKind.PUT:
            try:
                self.overrides[principal] = QuotaConfig.from_json(value)
            except (ValueError, TypeError, AttributeError) as exc:
                log.error("ignoring malformed quota at %s: %s", key.decode(), exc)
