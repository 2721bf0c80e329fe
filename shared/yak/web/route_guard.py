"""The guard that enforces a route ACL table (``yak.web.route_acls``), for every Yak service.

Installed as an app-wide FastAPI dependency only when security is on, so it runs after routing
(it knows the route's template and path parameters) and before the handler. For each request:

1. the route's checks from the table (``UNLISTED``, admins only, for a route missing from it;
   nothing at all for a ``PUBLIC`` one);
2. the principal, from the request's credential (``authenticate``; by default the
   ``Authorization`` header, ``Bearer <api key>`` or ``Basic``). A failure is audited as
   ``unauthenticated`` (``throttled`` after too many failed logins) as ``User:ANONYMOUS`` and
   raises ``AuthenticationError`` (401) or ``AuthenticationThrottledError`` (429);
3. each check, for each name its ``Source`` gives, with the authorizer of the security cache as
   of now: a denial is audited (``denied``) and raises the resource type's
   ``*AuthorizationError`` (403 ``TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED``). TOPIC CREATE
   also passes with CLUSTER CREATE (Kafka's one special case);
4. the request's ``Access`` (principal, authorizer, denial audit) goes into the service's
   ``CurrentAccess``, for the checks made where the names are known (FETCHED, LISTED);
5. an allowed request whose route is in ``audited`` is audited (``allowed``, naming every
   resource checked).

The errors go through the service's error table. A WebSocket is refused before it is accepted
(close code 1008, which the server sends as HTTP 403). Names in a JSON body are read from the
body (up to ``body_limit``: 413 ``MESSAGE_TOO_LARGE`` beyond) and the body is left for the
handler; a body that does not parse names nothing, and the handler then refuses it as
malformed. Audit lines carry the request id of ``yak.observability`` (validated, the one the
response returns).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial

from starlette.exceptions import WebSocketException
from starlette.requests import HTTPConnection, Request
from starlette.websockets import WebSocket

from yak.errors import (
    AuthenticationError,
    AuthenticationThrottledError,
    AuthorizationError,
    ClusterAuthorizationError,
    GroupAuthorizationError,
    TopicAuthorizationError,
)
from yak.observability.request_id import current_request_id, new_request_id
from yak.security.acl import CLUSTER_NAME, Operation, ResourceType
from yak.security.audit import audit
from yak.security.authorization_header import authenticate_header
from yak.security.authorizer import Authorizer
from yak.security.cache import SecurityCache
from yak.web.body import read_body
from yak.web.route_acls import UNLISTED, Check, RouteKey, RouteTable, Source, route_key

__all__ = [
    "ANONYMOUS",
    "BODY_LIMIT",
    "Access",
    "Authenticate",
    "CurrentAccess",
    "RouteGuard",
    "header_principal",
]

#: The principal of a request with no valid credential (Kafka's name for it).
ANONYMOUS = "User:ANONYMOUS"
#: The most the guard reads of a body whose names it checks.
BODY_LIMIT = 1024 * 1024
_POLICY_VIOLATION = 1008
_ERRORS: dict[ResourceType, type[AuthorizationError]] = {
    ResourceType.TOPIC: TopicAuthorizationError,
    ResourceType.GROUP: GroupAuthorizationError,
    ResourceType.CLUSTER: ClusterAuthorizationError,
}

#: The principal of a request: ``AuthenticationError`` when its credential is missing or bad.
Authenticate = Callable[[SecurityCache, HTTPConnection], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Access:
    """Who is asking, the ACLs as of the request's start, and where to report a denial."""

    principal: str
    authorizer: Authorizer
    on_denied: Callable[[ResourceType, str, Operation], None]

    def allowed(self, resource: ResourceType, name: str, operation: Operation) -> bool:
        return self.authorizer.authorize(self.principal, resource, name, operation)

    def require(self, resource: ResourceType, name: str, operation: Operation) -> None:
        """Raise the typed ``*_AUTHORIZATION_FAILED`` error of the resource type if denied."""
        if not self.allowed(resource, name, operation):
            self.on_denied(resource, name, operation)
            raise _ERRORS[resource](
                f"{self.principal} is not allowed {operation} on {resource} {name!r}",
                resource_type=resource.value,
                resource_name=name,
                operation=operation.value,
            )


class CurrentAccess:
    """The ``Access`` of the request being served (a context variable), one per service.

    The guard sets it when security is on; code that only learns the resource names deep down
    (a reader, which sees the topics a consumer fetches) or that answers with a list asks here.
    With security off nothing is set and every check passes, for one context-variable read.
    Create it once, at module level.
    """

    __slots__ = ("_var",)

    def __init__(self, name: str) -> None:
        self._var: ContextVar[Access | None] = ContextVar(name, default=None)

    def get(self) -> Access | None:
        return self._var.get()

    def set(self, access: Access) -> None:
        self._var.set(access)

    def require(self, resource: ResourceType, names: Iterable[str], operation: Operation) -> None:
        """Check every name (no-op with security off)."""
        access = self._var.get()
        if access is not None:
            for name in dict.fromkeys(names):
                access.require(resource, name, operation)

    def visible(
        self, resource: ResourceType, names: Iterable[str], operation: Operation
    ) -> list[str]:
        """The names the principal may ``operation`` (all of them with security off)."""
        access = self._var.get()
        if access is None:
            return list(names)
        return [name for name in names if access.allowed(resource, name, operation)]


async def header_principal(cache: SecurityCache, conn: HTTPConnection) -> str:
    """The principal of the request's ``Authorization`` header (``Bearer`` or ``Basic``)."""
    return await authenticate_header(cache, conn.headers.get("authorization", ""))


class RouteGuard:
    """The app-wide dependency enforcing ``table``; see the module docstring.

    ``audited``: the routes whose allowed requests are written to the audit log (denials always
    are). ``path_params``: the path parameter naming each resource type (``Source.PATH``).
    ``access``: where the request's ``Access`` goes. ``security``: the security cache, asked
    only for a request that needs a credential (a service may start it late). ``authenticate``:
    the credential to principal step.
    """

    def __init__(
        self,
        table: RouteTable,
        *,
        audited: Collection[RouteKey],
        path_params: Mapping[ResourceType, str],
        access: CurrentAccess,
        security: Callable[[], Awaitable[SecurityCache]],
        authenticate: Authenticate = header_principal,
        body_limit: int = BODY_LIMIT,
    ) -> None:
        self._table = table
        self._audited = audited
        self._path_params = path_params
        self._access = access
        self._security = security
        self._authenticate = authenticate
        self._body_limit = body_limit

    async def __call__(self, conn: HTTPConnection) -> None:
        try:
            await self._guard(conn)
        except (AuthenticationError, AuthenticationThrottledError, AuthorizationError) as exc:
            if isinstance(conn, WebSocket):
                raise WebSocketException(_POLICY_VIOLATION, exc.message) from None
            raise

    async def _guard(self, conn: HTTPConnection) -> None:
        key = route_key(conn)
        checks = self._table.get(key, UNLISTED)
        if checks is None:
            return
        cache = await self._security()
        log = partial(
            audit,
            action=f"{key[0]} {key[1]}",
            request_id=current_request_id() or new_request_id(),  # set by the middleware
            remote=f"{conn.client.host}:{conn.client.port}" if conn.client else "",
        )
        try:
            principal = await self._authenticate(cache, conn)
        except (AuthenticationError, AuthenticationThrottledError) as exc:
            throttled = isinstance(exc, AuthenticationThrottledError)
            log(principal=ANONYMOUS, result="throttled" if throttled else "unauthenticated")
            raise

        def on_denied(resource: ResourceType, name: str, operation: Operation) -> None:
            log(
                principal=principal,
                result="denied",
                resource=f"{resource}:{name}",
                operation=operation,
            )

        access = Access(principal, cache.authorizer, on_denied)
        self._access.set(access)
        checked: list[str] = []
        for check in checks:
            for name in await self._names(conn, check):
                _require(access, check, name)
                checked.append(f"{check.resource}:{name}")
        if key in self._audited:
            log(principal=principal, result="allowed", resource=",".join(checked))

    async def _names(self, conn: HTTPConnection, check: Check) -> list[str]:
        match check.source:
            case Source.CLUSTER:
                return [CLUSTER_NAME]
            case Source.PATH:
                return [str(conn.path_params[self._path_params[check.resource]])]
            case Source.BODY | Source.BODY_NAME:
                if not isinstance(conn, Request):
                    return []
                body = _json(await self._body(conn))
                if check.source is Source.BODY_NAME:
                    name = body.get("name") if isinstance(body, dict) else None
                    return [name] if isinstance(name, str) else []
                return list(dict.fromkeys(_body_topics(body)))
        return []  # FETCHED and LISTED are checked where the names are known

    async def _body(self, request: Request) -> bytes:
        body = await read_body(request, self._body_limit)
        # Leave the body for the handler: Starlette's ``Request.stream()`` replays ``_body``.
        request._body = body
        return body


def _require(access: Access, check: Check, name: str) -> None:
    if (
        check.resource is ResourceType.TOPIC
        and check.operation is Operation.CREATE
        and access.allowed(ResourceType.CLUSTER, CLUSTER_NAME, Operation.CREATE)
    ):
        return  # Kafka: CLUSTER CREATE allows creating any topic
    access.require(check.resource, name, check.operation)


def _json(body: bytes) -> object:
    try:
        return json.loads(body) if body.strip() else None
    except ValueError:
        return None


def _body_topics(body: object) -> Iterator[str]:
    if not isinstance(body, dict):
        return
    topics = body.get("topics")
    if isinstance(topics, list):
        yield from (t for t in topics if isinstance(t, str))
    for field in ("partitions", "offsets", "timestamps"):
        entries = body.get(field)
        if isinstance(entries, list):
            for entry in entries:
                if isinstance(entry, dict) and isinstance(entry.get("topic"), str):
                    yield entry["topic"]
