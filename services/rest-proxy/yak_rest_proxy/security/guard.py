"""The guard: authenticates every request and authorizes it through ``route_acls.ROUTE_ACLS``.

Installed as an app-wide dependency only when security is on (``YAK_SECURITY=on``), so it runs
after routing (it knows the route's template and path parameters) and before the handler; its
typed errors go through the proxy's one error table in the path's dialect (401 with
``WWW-Authenticate``, 403 ``*_AUTHORIZATION_FAILED``). A WebSocket is refused before it is
accepted (close code 1008, which the server sends as HTTP 403).

Credentials: ``Authorization: Bearer <api key>`` or ``Authorization: Basic <user:password>``;
without an ``Authorization`` header, a client certificate verified by the listener's CA
(``YAK_TLS_CLIENT_AUTH=optional|required``) names the principal: subject CN ``alice`` is
``User:alice`` (``yak.web.tls``), and a CN that is not a valid user name is refused.
A route missing from the table is refused (deny by default), though ``missing_routes`` keeps
that from happening. For checks on topics named in a JSON body, the guard reads the body (up
to ``BODY_LIMIT``) and leaves it for the handler; a body it cannot parse names nothing, and the
handler then refuses it as malformed.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator

from fastapi import Request
from starlette.exceptions import WebSocketException
from starlette.requests import HTTPConnection
from starlette.websockets import WebSocket

from yak.errors import AuthenticationError, AuthenticationThrottledError, AuthorizationError
from yak.observability.request_id import current_request_id, new_request_id
from yak.security.acl import CLUSTER_NAME, Operation, ResourceType, user_name, user_principal
from yak.security.audit import audit
from yak.security.cache import SecurityCache
from yak.web.tls import tls_peer_cn
from yak_rest_proxy.http.body import read_body
from yak_rest_proxy.security.access import ANONYMOUS, Access, current_access
from yak_rest_proxy.security.route_acls import AUDITED, ROUTE_ACLS, Check, Source

__all__ = ["ANONYMOUS", "BODY_LIMIT", "Guard"]

BODY_LIMIT = 1024 * 1024
_POLICY_VIOLATION = 1008
#: A route missing from the table (``missing_routes`` keeps this from happening): admins only.
_UNLISTED = (Check(ResourceType.CLUSTER, Source.CLUSTER, Operation.ALTER),)


class Guard:
    """The app-wide dependency; see the module docstring."""

    def __init__(self, cache: SecurityCache) -> None:
        self._cache = cache

    async def __call__(self, conn: HTTPConnection) -> None:
        try:
            await self._guard(conn)
        except (AuthenticationError, AuthenticationThrottledError, AuthorizationError) as exc:
            if isinstance(conn, WebSocket):
                raise WebSocketException(_POLICY_VIOLATION, exc.message) from None
            raise

    async def _guard(self, conn: HTTPConnection) -> None:
        route = conn.scope.get("route")
        template = str(getattr(route, "path_format", None) or getattr(route, "path", ""))
        method = "WEBSOCKET" if isinstance(conn, WebSocket) else conn.scope["method"]
        method = "GET" if method == "HEAD" else method
        action = f"{method} {template}"
        request_id = current_request_id() or new_request_id()  # set by the middleware
        remote = f"{conn.client.host}:{conn.client.port}" if conn.client else ""
        checks = ROUTE_ACLS.get((method, template), _UNLISTED)
        if checks is None:
            return
        try:
            principal = await self._authenticate(conn)
        except (AuthenticationError, AuthenticationThrottledError) as exc:
            throttled = isinstance(exc, AuthenticationThrottledError)
            audit(
                principal=ANONYMOUS,
                action=action,
                result="throttled" if throttled else "unauthenticated",
                request_id=request_id,
                remote=remote,
            )
            raise

        def on_denied(resource: ResourceType, name: str, operation: Operation) -> None:
            audit(
                principal=principal,
                action=action,
                result="denied",
                resource=f"{resource}:{name}",
                operation=operation,
                request_id=request_id,
                remote=remote,
            )

        access = Access(principal, self._cache.authorizer, on_denied)
        current_access.set(access)
        checked: list[str] = []
        for check in checks:
            for name in await self._names(conn, check):
                self._require(access, check, name)
                checked.append(f"{check.resource}:{name}")
        if (method, template) in AUDITED:
            audit(
                principal=principal,
                action=action,
                result="allowed",
                resource=",".join(checked),
                request_id=request_id,
                remote=remote,
            )

    @staticmethod
    def _require(access: Access, check: Check, name: str) -> None:
        if (
            check.resource is ResourceType.TOPIC
            and check.operation is Operation.CREATE
            and access.allowed(ResourceType.CLUSTER, CLUSTER_NAME, Operation.CREATE)
        ):
            return  # Kafka: CLUSTER CREATE allows creating any topic
        access.require(check.resource, name, check.operation)

    async def _authenticate(self, conn: HTTPConnection) -> str:
        header = conn.headers.get("authorization", "")
        scheme, _, credential = header.partition(" ")
        match scheme.lower():
            case "bearer":
                return await self._cache.authenticate_api_key(credential)
            case "basic":
                user, password = _basic(credential)
                return await self._cache.authenticate_password(user, password)
        if header:
            raise AuthenticationError(f"unsupported authorization scheme {scheme!r}")
        common_name = tls_peer_cn(conn.scope)
        if common_name is not None:
            return _certificate_principal(common_name)
        raise AuthenticationError("this API needs credentials: an API key (Bearer) or Basic")

    async def _names(self, conn: HTTPConnection, check: Check) -> list[str]:
        match check.source:
            case Source.CLUSTER:
                return [CLUSTER_NAME]
            case Source.PATH:
                key = "topic" if check.resource is ResourceType.TOPIC else "group"
                return [str(conn.path_params[key])]
            case Source.BODY | Source.BODY_NAME:
                if not isinstance(conn, Request):
                    return []
                body = _json(await _body(conn))
                if check.source is Source.BODY_NAME:
                    name = body.get("name") if isinstance(body, dict) else None
                    return [name] if isinstance(name, str) else []
                return list(dict.fromkeys(_body_topics(body)))
        return []  # FETCHED and LISTED are checked where the names are known


async def _body(request: Request) -> bytes:
    body = await read_body(request, BODY_LIMIT)
    # Leave the body for the handler: Starlette's ``Request.stream()`` replays ``_body``.
    request._body = body
    return body


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


def _certificate_principal(common_name: str) -> str:
    """``User:<cn>`` of a verified client certificate's subject common name."""
    principal = user_principal(common_name)
    try:
        user_name(principal)
    except ValueError:
        raise AuthenticationError(
            f"client certificate CN {common_name!r} is not a valid user name"
        ) from None
    return principal


def _basic(credential: str) -> tuple[str, str]:
    try:
        text = base64.b64decode(credential.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise AuthenticationError("malformed Basic credentials") from None
    user, sep, password = text.partition(":")
    if not sep:
        raise AuthenticationError("malformed Basic credentials")
    return user, password
