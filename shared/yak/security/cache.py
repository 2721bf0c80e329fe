"""``SecurityCache``: the users and ACLs of one cluster, kept current by one etcd watch.

Loads ``security/`` with a range read and follows it with a watch from the read's revision + 1
(``yak.metadata.watched``, as ``MetadataCache`` does for the cluster metadata), so a new ACL, a
revoked key or a deleted user takes effect on every proxy as soon as etcd delivers the event —
milliseconds. If the watch falls behind compaction it reloads; while etcd is unreachable it
retries and keeps answering from what it has.

Authentication: an API key is found by its key id (O(1)) and its secret checked against the
argon2id hash in a thread (tens of ms, memory-hard). A success is remembered for
``verified_ttl_s`` under the SHA-256 of the credential, and every later hit is checked against
the current record (the same key id with the same hash, or the same password hash), so a
revocation is never served from memory. Concurrent first uses of one credential share one
verification. A malformed stored value is logged and ignored.

With a ``FailedLoginLimiter``, every check that reaches argon2 and fails counts against the
user name (a password) or the key id (an API key), and so does a failed SCRAM proof of a known
user (``check_login``, ``count_login``: the Kafka listener's exchange); past the limit that
name or key is refused with ``AuthenticationThrottledError`` (429) without a check until its
window passes, while a credential remembered from a success still works. Unknown users and
key ids cost nothing and are not counted.

Single event loop; any number of request tasks may call it at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from argon2 import PasswordHasher

from yak.clock import Clock, SystemClock
from yak.errors import AuthenticationError, AuthenticationThrottledError
from yak.metadata.keyspace import KeyKind, Keyspace
from yak.metadata.store import EventKind, KeyValue, MetadataStore, WatchEvent
from yak.metadata.watched import WatchedCopy, WatchedPrefix
from yak.security.acl import AclBinding
from yak.security.authorizer import Authorizer
from yak.security.credentials import UserRecord, parse_api_key, verify_secret
from yak.security.login_limiter import FailedLoginLimiter, retry_after_header
from yak.security.scram import ScramCredential

__all__ = ["SecurityCache"]

log = logging.getLogger(__name__)

_MAX_VERIFIED = 10_000


class _Verified(NamedTuple):
    user: str
    key_id: str | None  # None: a password
    hash: str
    expires: float


class SecurityCache(WatchedCopy):
    """Follows ``security/`` of one cluster; see the module docstring."""

    def __init__(
        self,
        store: MetadataStore,
        keyspace: Keyspace,
        *,
        super_users: Iterable[str] = (),
        hasher: PasswordHasher | None = None,
        clock: Clock | None = None,
        verified_ttl_s: float = 60.0,
        login_limiter: FailedLoginLimiter | None = None,
    ) -> None:
        self._keyspace = keyspace
        self._super_users = frozenset(super_users)
        self._hasher = hasher
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._ttl_s = verified_ttl_s
        self._limiter = login_limiter
        self._users: dict[str, UserRecord] = {}
        self._key_owner: dict[str, str] = {}
        self._acls: dict[str, AclBinding] = {}
        self._authorizer: Authorizer | None = None
        self._verified: dict[bytes, _Verified] = {}
        self._pending: dict[bytes, asyncio.Task[_Verified | None]] = {}
        self._watched = WatchedPrefix(
            store,
            keyspace.security_prefix,
            what="security",
            load=self._load,
            apply=self._apply_event,
            clock=self._clock,
        )

    @property
    def authorizer(self) -> Authorizer:
        """The authorizer for the current ACLs (a new one after each change)."""
        if self._authorizer is None:
            self._authorizer = Authorizer(self._acls.values(), self._super_users)
        return self._authorizer

    @property
    def users(self) -> dict[str, UserRecord]:
        return dict(self._users)

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The user's stored SCRAM credential for ``mechanism`` (None: no user, no password,
        or a password set before SCRAM credentials were stored)."""
        record = self._users.get(user)
        return None if record is None else record.scram.get(mechanism)

    # -- authentication ---------------------------------------------------------------------

    async def authenticate_api_key(self, token: str) -> str:
        """The principal (``User:<name>``) holding this API key, else AuthenticationError."""
        parsed = parse_api_key(token)
        user = None if parsed is None else self._key_owner.get(parsed.key_id)
        record = None if user is None else self._users.get(user)
        if parsed is None or record is None or parsed.key_id not in record.keys:
            raise AuthenticationError("unknown or revoked API key")
        stored_hash = record.keys[parsed.key_id].hash
        found = await self._verify(token, record.name, parsed.key_id, stored_hash, parsed.secret)
        if found is None:
            raise AuthenticationError("unknown or revoked API key")
        return record.principal

    async def authenticate_password(self, user: str, password: str) -> str:
        """The principal of ``user`` if ``password`` is its password, else AuthenticationError."""
        record = self._users.get(user)
        if record is None or record.password is None:
            raise AuthenticationError("wrong user name or password")
        credential = f"{user}\x00{password}"
        found = await self._verify(credential, user, None, record.password, password)
        if found is None:
            raise AuthenticationError("wrong user name or password")
        return record.principal

    def check_login(self, user: str) -> None:
        """``AuthenticationThrottledError`` while ``user``'s password logins are refused: for a
        check made outside this cache (a SCRAM exchange, which never reaches argon2)."""
        self._refuse_if_throttled(user, None, self._clock.monotonic())

    def count_login(self, user: str, *, ok: bool) -> None:
        """Count a password check made outside this cache against ``user``'s limit (call it
        for known users only, as the cache's own checks count)."""
        if self._limiter is not None:
            if ok:
                self._limiter.succeeded(_limited_key(user, None))
            else:
                self._limiter.failed(_limited_key(user, None), self._clock.monotonic())

    async def _verify(
        self, credential: str, user: str, key_id: str | None, stored_hash: str, secret: str
    ) -> _Verified | None:
        digest = hashlib.sha256(credential.encode()).digest()
        now = self._clock.monotonic()
        hit = self._verified.get(digest)
        if hit is not None and hit.hash == stored_hash and hit.user == user and now < hit.expires:
            return hit
        pending = self._pending.get(digest)
        if pending is None:
            self._refuse_if_throttled(user, key_id, now)
            pending = asyncio.get_running_loop().create_task(
                self._check(digest, user, key_id, stored_hash, secret)
            )
            self._pending[digest] = pending
            pending.add_done_callback(lambda _t: self._pending.pop(digest, None))
        # The check is a task of its own: a requester that goes away does not cancel it for
        # the others waiting on the same credential.
        return await asyncio.shield(pending)

    async def _check(
        self, digest: bytes, user: str, key_id: str | None, stored_hash: str, secret: str
    ) -> _Verified | None:
        ok = await asyncio.to_thread(verify_secret, stored_hash, secret, self._hasher)
        if self._limiter is not None:
            limited = _limited_key(user, key_id)
            if ok:
                self._limiter.succeeded(limited)
            else:
                self._limiter.failed(limited, self._clock.monotonic())
        if not ok:
            return None
        verified = _Verified(user, key_id, stored_hash, self._clock.monotonic() + self._ttl_s)
        if len(self._verified) >= _MAX_VERIFIED:
            self._verified.clear()
        self._verified[digest] = verified
        return verified

    def _refuse_if_throttled(self, user: str, key_id: str | None, now: float) -> None:
        if self._limiter is None:
            return
        wait = self._limiter.retry_after(_limited_key(user, key_id), now)
        if wait > 0:
            what = f"API key {key_id}" if key_id is not None else f"user {user!r}"
            seconds = retry_after_header(wait)
            raise AuthenticationThrottledError(
                f"too many failed logins for {what}: retry in {seconds} s",
                retry_after_s=seconds,
                retry_after_ms=max(1, round(wait * 1000)),
            )

    # -- following etcd ---------------------------------------------------------------------

    def _load(self, kvs: Sequence[KeyValue]) -> None:
        self._users, self._key_owner, self._acls = {}, {}, {}
        self._authorizer = None
        for kv in kvs:
            self._apply(EventKind.PUT, kv.key, kv.value)

    def _apply_event(self, event: WatchEvent) -> None:
        self._apply(event.kind, event.key, event.value)

    def _apply(self, kind: EventKind, key: bytes, value: bytes) -> None:
        parsed = self._keyspace.parse(key)
        if parsed is None or parsed.name is None:
            return
        if parsed.kind is KeyKind.PRINCIPAL:
            self._drop_user(parsed.name)
            if kind is EventKind.PUT:
                try:
                    record = UserRecord.from_json(value)
                except (ValueError, KeyError, TypeError) as exc:
                    log.error("ignoring malformed user record at %s: %s", key.decode(), exc)
                    return
                self._users[parsed.name] = record
                self._key_owner.update(dict.fromkeys(record.keys, parsed.name))
        elif parsed.kind is KeyKind.ACL:
            self._acls.pop(parsed.name, None)
            self._authorizer = None
            if kind is EventKind.PUT:
                try:
                    self._acls[parsed.name] = AclBinding.from_json(value)
                except (ValueError, KeyError, TypeError) as exc:
                    log.error("ignoring malformed ACL at %s: %s", key.decode(), exc)

    def _drop_user(self, name: str) -> None:
        old = self._users.pop(name, None)
        if old is not None:
            for key_id in old.keys:
                self._key_owner.pop(key_id, None)
        stale = [digest for digest, hit in self._verified.items() if hit.user == name]
        for digest in stale:
            del self._verified[digest]


def _limited_key(user: str, key_id: str | None) -> str:
    return f"user:{user}" if key_id is None else f"key:{key_id}"
