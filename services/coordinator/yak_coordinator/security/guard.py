"""The admin API's guard: ``yak.web.route_guard`` enforcing ``route_acls.ROUTE_ACLS`` (only
with ``YAK_SECURITY=on``), on the security cache of the coordinator's own etcd connection.

Credentials are a user's, as on the public API: ``Authorization: Bearer <api key>`` or
``Basic``; 401 ``UNAUTHENTICATED``, 403 ``*_AUTHORIZATION_FAILED`` through the one error table
of ``yak.web.errors``. The cache (``AdminSecurity``) starts on the first request that needs a
credential, as the etcd connection comes up in the background. A rest-proxy forwards its
caller's ``Authorization`` header, so the coordinator authorizes the end user; a broker's
Kafka listener sends the cluster secret with ``Yak-On-Behalf-Of: User:<name>`` for its SASL
principal (``service_principal``: accepted only with the secret and without a user
credential); a standby forwards either to the controller, which checks it, and audits it. List
answers keep the names the principal may DESCRIBE (``visible``).

Every refusal is written to the audit log (``yak.security.audit``: ``unauthenticated``,
``throttled`` or ``denied``), and so is every administrative change that passed its checks
(``allowed``: the writes of ``route_acls.AUDITED``). Failed logins are limited as on the
proxies (``YAK_AUTH_MAX_FAILURES`` in ``YAK_AUTH_FAILURE_WINDOW_S``: 429
``AUTHENTICATION_THROTTLED``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from yak.metadata.keyspace import Keyspace
from yak.security.acl import Operation, ResourceType
from yak.security.cache import SecurityCache
from yak.security.login_limiter import FailedLoginLimiter
from yak.web.route_guard import CurrentAccess, RouteGuard
from yak_coordinator.security.route_acls import AUDITED, PATH_PARAMS, ROUTE_ACLS
from yak_coordinator.security.service_principal import admin_principal
from yak_coordinator.service import Coordinator

__all__ = ["AdminGuard", "AdminSecurity", "visible"]

_access = CurrentAccess("yak_admin_access")


def visible(resource: ResourceType, names: Iterable[str]) -> set[str]:
    """The names the request's principal may DESCRIBE (all of them with security off)."""
    return set(_access.visible(resource, names, Operation.DESCRIBE))


class AdminSecurity:
    """The security cache of one coordinator, started once its etcd connection is up."""

    def __init__(self, coordinator: Coordinator, super_users: Iterable[str]) -> None:
        self._coordinator = coordinator
        self._super_users = tuple(super_users)
        self._cache: SecurityCache | None = None
        self._lock = asyncio.Lock()

    async def cache(self) -> SecurityCache:
        """The cache (``MetadataStoreError``, a 503, until etcd is reachable)."""
        if self._cache is None:
            async with self._lock:
                if self._cache is None:
                    keyspace = Keyspace(self._coordinator.settings.cluster_id)
                    store = self._coordinator.store
                    cache = SecurityCache(
                        store,
                        keyspace,
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


class AdminGuard(RouteGuard):
    """The app-wide dependency; see the module docstring."""

    def __init__(self, security: AdminSecurity) -> None:
        super().__init__(
            ROUTE_ACLS,
            audited=AUDITED,
            path_params=PATH_PARAMS,
            access=_access,
            security=security.cache,
            authenticate=admin_principal,
        )
