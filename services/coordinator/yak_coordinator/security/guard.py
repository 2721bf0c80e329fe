"""The admin API's guard: authenticates every request and authorizes it through
``route_acls.ROUTE_ACLS`` (only with ``YAK_SECURITY=on``).

Installed as an app-wide dependency, so it runs after routing (it knows the route's template
and path parameters) and before the handler; its typed errors go through the one error table
of ``yak.web.errors`` (401 ``UNAUTHENTICATED``, 403 ``*_AUTHORIZATION_FAILED``). Credentials
are a user's, as on the public API: ``Authorization: Bearer <api key>`` or ``Basic``, checked
with a ``SecurityCache`` on the coordinator's own etcd connection (started on the first
request that needs it, as the connection comes up in the background). A rest-proxy forwards
its caller's ``Authorization`` header, so the coordinator authorizes the end user; a standby
forwards it to the controller, which checks it. List answers keep the names the principal may
DESCRIBE (``visible``).

Every refusal is written to the audit log (``yak.security.audit``, as on the rest-proxy:
``unauthenticated`` or ``denied``), and so is every administrative change that passed its
checks (``allowed``: the writes of ``AUDITED``). A request a standby forwards is checked, and
audited, by the controller that serves it. Failed logins are limited as on the proxies
(``YAK_AUTH_MAX_FAILURES`` in ``YAK_AUTH_FAILURE_WINDOW_S``: 429 ``AUTHENTICATION_THROTTLED``).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterable
from contextvars import ContextVar

from fastapi import Request

from yak.errors import (
    AuthenticationError,
    AuthenticationThrottledError,
    AuthorizationError,
    ClusterAuthorizationError,
    GroupAuthorizationError,
    TopicAuthorizationError,
)
from yak.metadata.keyspace import Keyspace
from yak.security.acl import CLUSTER_NAME, Operation, ResourceType
from yak.security.audit import audit
from yak.security.authorization_header import authenticate_header
from yak.security.authorizer import Authorizer
from yak.security.cache import SecurityCache
from yak.security.login_limiter import FailedLoginLimiter
from yak_coordinator.security.route_acls import ROUTE_ACLS, Check, Source
from yak_coordinator.service import Coordinator

__all__ = ["AUDITED", "AdminGuard", "AdminSecurity", "visible"]

#: Methods whose allowed requests are audited: every change the admin API makes.
AUDITED = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: The principal of an audit line for a request without a valid credential.
ANONYMOUS = "User:ANONYMOUS"

#: A route missing from the table (``missing_routes`` keeps this from happening): admins only.
_UNLISTED = (Check(ResourceType.CLUSTER, Source.CLUSTER, Operation.ALTER),)
_ERRORS: dict[ResourceType, type[AuthorizationError]] = {
    ResourceType.TOPIC: TopicAuthorizationError,
    ResourceType.GROUP: GroupAuthorizationError,
    ResourceType.CLUSTER: ClusterAuthorizationError,
}

_access: ContextVar[tuple[str, Authorizer] | None] = ContextVar("yak_admin_access", default=None)


def visible(resource: ResourceType, names: Iterable[str]) -> set[str]:
    """The names the request's principal may DESCRIBE (all of them with security off)."""
    access = _access.get()
    if access is None:
        return set(names)
    principal, authorizer = access
    return {n for n in names if authorizer.authorize(principal, resource, n, Operation.DESCRIBE)}


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


class AdminGuard:
    """The app-wide dependency; see the module docstring."""

    def __init__(self, security: AdminSecurity) -> None:
        self._security = security

    async def __call__(self, request: Request) -> None:
        route = request.scope.get("route")
        template = str(getattr(route, "path_format", ""))
        method = "GET" if request.method == "HEAD" else request.method
        checks = ROUTE_ACLS.get((method, template), _UNLISTED)
        if checks is None:
            return
        cache = await self._security.cache()
        where = {
            "action": f"{method} {template}",
            "request_id": request.headers.get("x-request-id") or uuid.uuid4().hex,
            "remote": f"{request.client.host}:{request.client.port}" if request.client else "",
        }
        try:
            principal = await authenticate_header(cache, request.headers.get("authorization", ""))
        except (AuthenticationError, AuthenticationThrottledError) as exc:
            throttled = isinstance(exc, AuthenticationThrottledError)
            result = "throttled" if throttled else "unauthenticated"
            audit(principal=ANONYMOUS, result=result, **where)
            raise
        authorizer = cache.authorizer
        _access.set((principal, authorizer))
        checked: list[str] = []
        for check in checks:
            for name in await _names(request, check):
                try:
                    _require(principal, authorizer, check, name)
                except AuthorizationError:
                    resource = f"{check.resource}:{name}"
                    operation = check.operation.value
                    audit(
                        principal=principal,
                        result="denied",
                        resource=resource,
                        operation=operation,
                        **where,
                    )
                    raise
                checked.append(f"{check.resource}:{name}")
        if method in AUDITED:
            audit(principal=principal, result="allowed", resource=",".join(checked), **where)


def _require(principal: str, authorizer: Authorizer, check: Check, name: str) -> None:
    creating = check.resource is ResourceType.TOPIC and check.operation is Operation.CREATE
    cluster = ResourceType.CLUSTER
    if creating and authorizer.authorize(principal, cluster, CLUSTER_NAME, Operation.CREATE):
        return  # Kafka: CLUSTER CREATE allows creating any topic
    if not authorizer.authorize(principal, check.resource, name, check.operation):
        raise _ERRORS[check.resource](
            f"{principal} is not allowed {check.operation} on {check.resource} {name!r}",
            resource_type=check.resource.value,
            resource_name=name,
            operation=check.operation.value,
        )


async def _names(request: Request, check: Check) -> list[str]:
    match check.source:
        case Source.CLUSTER:
            return [CLUSTER_NAME]
        case Source.PATH:
            key = "name" if check.resource is ResourceType.TOPIC else "group_id"
            return [str(request.path_params[key])]
        case Source.BODY_NAME:
            try:
                body = json.loads(await request.body() or b"null")
            except ValueError:
                return []  # the handler refuses the malformed body
            name = body.get("name") if isinstance(body, dict) else None
            return [name] if isinstance(name, str) else []
    return []  # LISTED: filtered by the handler (``visible``)
