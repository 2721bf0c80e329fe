"""The registry's security with ``YAK_SECURITY=on``: the cluster's users, API keys and ACLs,
enforced by the guard every Yak service uses (``yak.web.route_guard``) over ``ROUTE_ACLS``.

Credentials are a Yak user's, as on the proxies and the coordinator: ``Authorization: Basic``
(what Confluent's clients send with ``basic.auth.user.info``) or ``Bearer <api key>``. The
security cache follows the cluster's ``security/`` keys on the registry's own etcd
connection, started on the first request that needs a credential. Refusals are Confluent's
bodies (``api.errors``): 401 / 40101, 429 / 42901 after too many failed logins, 403 / 40301;
each is audited, and so is every allowed change (``AUDITED``).

Yak's ACLs know topics, groups and the cluster, so a subject is checked as the TOPIC of the
same name: a grant on the topic prefix ``orders`` (PREFIXED) covers ``orders-key`` and
``orders-value``, the subjects of Confluent's default TopicNameStrategy.

==========================================  ==============================================
route                                       needs
==========================================  ==============================================
every read, lookup and compatibility check  a valid credential
``POST /subjects/{s}/versions`` (register)   TOPIC ``s`` WRITE
``DELETE /subjects/{s}[/versions/{v}]``     TOPIC ``s`` DELETE
``PUT``, ``DELETE /config/{s}``             TOPIC ``s`` ALTER_CONFIGS
``PUT``, ``DELETE /config``; every mode     CLUSTER ALTER_CONFIGS
change
``/healthz``, ``/readyz``                   nothing
==========================================  ==============================================
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from yak.metadata.keyspace import Keyspace
from yak.metadata.store import MetadataStore
from yak.security.acl import Operation, ResourceType
from yak.security.cache import SecurityCache
from yak.security.login_limiter import FailedLoginLimiter
from yak.web.route_acls import AUTHENTICATED, PUBLIC, Check, RouteKey, RouteTable, Source
from yak.web.route_guard import CurrentAccess, RouteGuard

__all__ = ["AUDITED", "ROUTE_ACLS", "RegistrySecurity", "registry_guard"]

_access = CurrentAccess("yak_registry_access")


def _subject(operation: Operation) -> tuple[Check, ...]:
    return (Check(ResourceType.TOPIC, Source.PATH, operation),)


_CLUSTER_CONFIGS = (Check(ResourceType.CLUSTER, Source.CLUSTER, Operation.ALTER_CONFIGS),)

_READS: tuple[RouteKey, ...] = (
    ("GET", "/subjects"),
    ("GET", "/subjects/{subject}/versions"),
    ("GET", "/subjects/{subject}/versions/{version}"),
    ("GET", "/subjects/{subject}/versions/{version}/schema"),
    ("GET", "/subjects/{subject}/versions/{version}/referencedby"),
    ("GET", "/schemas/ids/{schema_id}"),
    ("GET", "/schemas/ids/{schema_id}/schema"),
    ("GET", "/schemas/ids/{schema_id}/subjects"),
    ("GET", "/schemas/ids/{schema_id}/versions"),
    ("GET", "/schemas/types"),
    ("GET", "/config"),
    ("GET", "/config/{subject}"),
    ("GET", "/mode"),
    ("GET", "/mode/{subject}"),
    ("POST", "/subjects/{subject}"),
    ("POST", "/compatibility/subjects/{subject}/versions"),
    ("POST", "/compatibility/subjects/{subject}/versions/{version}"),
)

ROUTE_ACLS: RouteTable = {
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    **dict.fromkeys(_READS, AUTHENTICATED),
    ("POST", "/subjects/{subject}/versions"): _subject(Operation.WRITE),
    ("DELETE", "/subjects/{subject}"): _subject(Operation.DELETE),
    ("DELETE", "/subjects/{subject}/versions/{version}"): _subject(Operation.DELETE),
    ("PUT", "/config/{subject}"): _subject(Operation.ALTER_CONFIGS),
    ("DELETE", "/config/{subject}"): _subject(Operation.ALTER_CONFIGS),
    ("PUT", "/config"): _CLUSTER_CONFIGS,
    ("DELETE", "/config"): _CLUSTER_CONFIGS,
    ("PUT", "/mode"): _CLUSTER_CONFIGS,
    ("PUT", "/mode/{subject}"): _CLUSTER_CONFIGS,
    ("DELETE", "/mode/{subject}"): _CLUSTER_CONFIGS,
}

#: Every change: audited when allowed (refusals always are).
AUDITED = frozenset(key for key, checks in ROUTE_ACLS.items() if checks)


class RegistrySecurity:
    """The security cache of one registry, started on first need (see the module doc)."""

    def __init__(self, store: MetadataStore, cluster_id: str, super_users: Iterable[str]) -> None:
        self._store = store
        self._keyspace = Keyspace(cluster_id)
        self._super_users = tuple(super_users)
        self._cache: SecurityCache | None = None
        self._lock = asyncio.Lock()

    async def cache(self) -> SecurityCache:
        """The cache (``MetadataStoreError``, a 500 / 50001, until etcd answers)."""
        if self._cache is None:
            async with self._lock:
                if self._cache is None:
                    cache = SecurityCache(
                        self._store,
                        self._keyspace,
                        super_users=self._super_users,
                        login_limiter=FailedLoginLimiter.from_env(),
                    )
                    await cache.start()
                    self._cache = cache
        return self._cache

    async def wait_for_revision(self, revision: int) -> None:
        """Wait until the cache reflects a security write (tests, tools)."""
        await (await self.cache()).wait_for_revision(revision)

    async def stop(self) -> None:
        cache, self._cache = self._cache, None
        if cache is not None:
            await cache.stop()


def registry_guard(security: RegistrySecurity) -> RouteGuard:
    """The app-wide dependency enforcing ``ROUTE_ACLS`` with ``security``'s cache."""
    return RouteGuard(
        ROUTE_ACLS,
        audited=AUDITED,
        path_params={ResourceType.TOPIC: "subject"},
        access=_access,
        security=security.cache,
    )
