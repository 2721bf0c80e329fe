"""Per-principal quota overrides in etcd: ``security/quotas/<principal>`` (``QuotaStore``).

Value: JSON ``{"produce_bytes_per_s": int | null, "fetch_bytes_per_s": int | null}``; ``null``
(or a missing key) means the proxy's default (``YAK_QUOTA_*_BYTES_PER_S``), 0 unlimited, as
Kafka's ``user`` quota entities override its defaults. Shared because two services touch the
range: the coordinator writes it (the quota admin API, which proxies send to it, since a
proxy's etcd user may not write ``security/``), proxies read it and follow it
(``yak.security.quota_overrides.QuotaOverrides``).
"""

from __future__ import annotations

import contextlib
import json
from typing import NamedTuple

from yak.errors import InvalidRequestError, ResourceNotFoundError
from yak.metadata.keyspace import Keyspace
from yak.metadata.store import Compare, CompareOp, DeleteOp, MetadataStore
from yak.security.acl import user_name

__all__ = ["QuotaConfig", "QuotaStore", "quota_prefix", "quota_principal"]


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


def quota_prefix(keyspace: Keyspace) -> str:
    """Where the overrides of ``keyspace``'s cluster live."""
    return f"{keyspace.security_prefix}quotas/"


class QuotaStore:
    """Reads and writes ``security/quotas/`` of one cluster (straight to etcd)."""

    def __init__(self, store: MetadataStore, keyspace: Keyspace) -> None:
        self._store = store
        self._prefix = quota_prefix(keyspace)

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
