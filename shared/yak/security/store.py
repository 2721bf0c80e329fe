"""``SecurityStore``: users, API keys, passwords and ACLs in etcd, written through one class.

Keys (``yak.metadata.keyspace``): ``security/principals/<user>`` holds a ``UserRecord``,
``security/acls/<acl-id>`` an ``AclBinding``. Every change of a user is a read-modify-write
guarded by a compare-and-swap on the key's ``mod_revision``, retried when another writer got
there first, so two admins adding keys to one user at once both succeed. Every method reads
etcd directly: it serves the admin API and ``yak users create --bootstrap`` (straight to etcd,
before any proxy runs) alike. Readers that must be fast use ``SecurityCache`` instead.

Secrets never reach etcd: a new API key's token is returned once and only its argon2id hash is
stored (hashing runs in a thread, off the event loop). A password is stored as its argon2id
hash and its SCRAM credentials (``yak.security.scram``), both derived in that thread, both
replaced or removed together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from types import MappingProxyType
from typing import NamedTuple

from argon2 import PasswordHasher

from yak.clock import Clock, SystemClock
from yak.errors import DuplicateResourceError, InvalidRequestError, ResourceNotFoundError
from yak.metadata.keyspace import Keyspace, validate_member_id
from yak.metadata.store import Compare, CompareOp, DeleteOp, MetadataStore, PutOp
from yak.security.acl import AclBinding, AclFilter
from yak.security.credentials import (
    StoredKey,
    UserRecord,
    hash_secret,
    new_api_key,
)
from yak.security.scram import ScramCredential, scram_credentials

__all__ = ["MAX_ACLS_PER_CHANGE", "NewApiKey", "SecurityStore", "valid_user_name"]

#: ACL bindings written in one etcd transaction (etcd allows 128 operations in one).
MAX_ACLS_PER_CHANGE = 100

_CAS_ATTEMPTS = 20

_Change = Callable[[UserRecord], UserRecord]
_NO_SCRAM: MappingProxyType[str, ScramCredential] = MappingProxyType({})


class NewApiKey(NamedTuple):
    """A key just made: the token (shown once), its id and the store revision of the write."""

    user: str
    key_id: str
    token: str
    revision: int


def valid_user_name(name: str) -> str:
    """``name`` if it may name a user, else ``InvalidRequestError`` (a proxy checks a path's
    name before sending a change to the coordinator, which checks it again here)."""
    try:
        return validate_member_id(name)
    except ValueError as exc:
        raise InvalidRequestError(str(exc).replace("id", "user name", 1)) from None


class SecurityStore:
    """Reads and writes the ``security/`` keys of one cluster; see the module docstring."""

    def __init__(
        self,
        store: MetadataStore,
        keyspace: Keyspace,
        *,
        hasher: PasswordHasher | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self._keyspace = keyspace
        self._hasher = hasher
        self._clock: Clock = clock if clock is not None else SystemClock()

    async def _hash(self, secret: str) -> str:
        return await asyncio.to_thread(hash_secret, secret, self._hasher)

    async def _with_password(self, record: UserRecord, password: str | None) -> UserRecord:
        """``record`` with ``password``'s hash and SCRAM credentials (None: without any)."""
        if password is None:
            return replace(record, password=None, scram=_NO_SCRAM)
        hashed = await self._hash(password)
        scram = await asyncio.to_thread(scram_credentials, password)
        return replace(record, password=hashed, scram=MappingProxyType(scram))

    # -- users ------------------------------------------------------------------------------

    async def get_user(self, name: str) -> UserRecord:
        """The user's record; ``ResourceNotFoundError`` if there is none."""
        kv = await self._store.get(self._keyspace.principal(valid_user_name(name)))
        if kv is None:
            raise ResourceNotFoundError(f"no user {name!r}", user=name)
        return UserRecord.from_json(kv.value)

    async def list_users(self) -> list[UserRecord]:
        result = await self._store.range_prefix(f"{self._keyspace.security_prefix}principals/")
        return [UserRecord.from_json(kv.value) for kv in result.kvs]

    async def create_user(
        self, name: str, *, password: str | None = None, with_key: bool = False
    ) -> tuple[UserRecord, NewApiKey | None, int]:
        """Create a user (``DuplicateResourceError`` if it exists), optionally with a key.

        Returns the record, the new key (if asked for) and the store revision of the write.
        """
        key = self._keyspace.principal(valid_user_name(name))
        record = UserRecord(name=name, created_ms=self._clock.time_ms())
        if password is not None:
            record = await self._with_password(record, password)
        made = None
        if with_key:
            token = new_api_key()
            stored = StoredKey(await self._hash(token.secret), self._clock.time_ms(), "initial")
            record = record.with_key(token.key_id, stored)
            made = (token.key_id, token.token)
        result = await self._store.txn([Compare.absent(key)], [PutOp(key, record.to_json())])
        if not result.succeeded:
            raise DuplicateResourceError(f"user {name!r} exists already", user=name)
        new_key = None if made is None else NewApiKey(name, made[0], made[1], result.revision)
        return record, new_key, result.revision

    async def delete_user(self, name: str) -> int:
        """Delete the user and every credential it holds; return the store revision."""
        key = self._keyspace.principal(valid_user_name(name))
        result = await self._store.txn(
            [Compare.create_revision(key, 0, CompareOp.GREATER)], [DeleteOp(key)]
        )
        if not result.succeeded:
            raise ResourceNotFoundError(f"no user {name!r}", user=name)
        return result.revision

    async def add_key(self, name: str, description: str = "") -> NewApiKey:
        """Make a new API key for the user; its token is in the answer and nowhere else."""
        token = new_api_key()
        stored = StoredKey(await self._hash(token.secret), self._clock.time_ms(), description)
        revision = await self._update(name, lambda record: record.with_key(token.key_id, stored))
        return NewApiKey(name, token.key_id, token.token, revision)

    async def revoke_key(self, name: str, key_id: str) -> int:
        """Remove one key of the user (``ResourceNotFoundError`` if it has no such key)."""

        def revoke(record: UserRecord) -> UserRecord:
            if key_id not in record.keys:
                raise ResourceNotFoundError(f"user {name!r} has no key {key_id!r}", key_id=key_id)
            return record.without_key(key_id)

        return await self._update(name, revoke)

    async def set_password(self, name: str, password: str | None) -> int:
        """Set (or with None, remove) the user's password (HTTP Basic, Kafka's SASL)."""
        changed = await self._with_password(UserRecord(name, 0), password)
        return await self._update(
            name, lambda record: replace(record, password=changed.password, scram=changed.scram)
        )

    async def _update(self, name: str, change: _Change) -> int:
        key = self._keyspace.principal(valid_user_name(name))
        for _ in range(_CAS_ATTEMPTS):
            kv = await self._store.get(key)
            if kv is None:
                raise ResourceNotFoundError(f"no user {name!r}", user=name)
            record = change(UserRecord.from_json(kv.value))
            result = await self._store.txn(
                [Compare.mod_revision(key, kv.mod_revision)], [PutOp(key, record.to_json())]
            )
            if result.succeeded:
                return result.revision
        raise InvalidRequestError(f"user {name!r} kept changing; try again")

    # -- ACLs -------------------------------------------------------------------------------

    async def list_acls(self, selected: AclFilter | None = None) -> list[AclBinding]:
        result = await self._store.range_prefix(f"{self._keyspace.security_prefix}acls/")
        acls = [AclBinding.from_json(kv.value) for kv in result.kvs]
        return [acl for acl in acls if selected is None or selected.matches(acl)]

    async def add_acls(self, acls: list[AclBinding]) -> int:
        """Store the bindings in one transaction (adding one that exists, or the same one
        twice, is a no-op); return the revision. At most ``MAX_ACLS_PER_CHANGE`` distinct
        bindings at once (etcd caps a transaction's operations)."""
        unique = {acl.acl_id: acl for acl in acls}
        if len(unique) > MAX_ACLS_PER_CHANGE:
            raise InvalidRequestError(
                f"at most {MAX_ACLS_PER_CHANGE} ACLs at once, got {len(unique)}"
            )
        result = await self._store.txn(
            [], [PutOp(self._keyspace.acl(i), acl.to_json()) for i, acl in unique.items()]
        )
        return result.revision

    async def remove_acls(self, selected: AclFilter) -> tuple[list[AclBinding], int]:
        """Delete the bindings the filter selects; return them and the store revision."""
        acls = await self.list_acls(selected)
        revision = 0
        # In chunks under etcd's per-transaction limit: a filter may select many bindings.
        for start in range(0, len(acls), MAX_ACLS_PER_CHANGE):
            chunk = acls[start : start + MAX_ACLS_PER_CHANGE]
            deleted = await self._store.txn(
                [], [DeleteOp(self._keyspace.acl(a.acl_id)) for a in chunk]
            )
            revision = deleted.revision
        return acls, revision
