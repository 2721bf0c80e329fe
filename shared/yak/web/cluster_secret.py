"""``ClusterSecretMiddleware``: the internal plane refuses callers without the cluster secret.

A pure ASGI middleware (no Starlette request object on the data plane's hot path): one scan
of the request headers for ``X-Yak-Cluster-Secret`` and one constant-time compare. A request
without it, or with another value, answers 401 ``UNAUTHENTICATED`` with a body naming what is
missing, and a ``WWW-Authenticate`` challenge naming the secret's header (and Bearer and Basic
when ``allow`` lets user credentials in), and never reaches the app; its body is not read.
``/healthz``, ``/readyz`` and ``/metrics`` stay open (load balancers, ``yak up``'s supervisor
and Prometheus hold no secret; see docs/observability.md for why metrics are not behind it),
and so may other exact paths a service lists. WebSocket handshakes are refused with
HTTP 403 (close before accept). ``lifespan`` events pass through.

A request that carries the secret is marked as coming from a cluster service
(``is_cluster_peer(scope)``). ``allow`` is the hook for APIs that both services and operators
call (the coordinator's admin API): a request without the secret that ``allow(scope)``
accepts — e.g. one with an ``Authorization`` header — goes on unmarked, and the app must then
authenticate it as a user.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from yak.security.cluster_secret import CLUSTER_SECRET_HEADER, secret_matches
from yak.web.errors import WWW_AUTHENTICATE

__all__ = ["OPEN_PATHS", "ClusterSecretMiddleware", "is_cluster_peer"]

#: The scope key marking a request that carried the cluster secret.
CLUSTER_PEER_KEY = "yak.cluster_peer"
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
_HEADER = CLUSTER_SECRET_HEADER.encode()
_BODY = orjson.dumps(
    {
        "code": "UNAUTHENTICATED",
        "message": (
            "this is a Yak internal endpoint: send the cluster secret in the "
            "X-Yak-Cluster-Secret header (YAK_CLUSTER_SECRET or YAK_CLUSTER_SECRET_FILE)"
        ),
        "details": {},
    }
)
#: A scheme of Yak's own (RFC 9110 allows any token): what the caller is missing.
_CHALLENGE = f'Yak-Cluster-Secret realm="yak", header="{CLUSTER_SECRET_HEADER}"'


class ClusterSecretMiddleware:
    """Lets through requests that carry ``secret`` (and those to ``open_paths``)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        secret: str,
        open_paths: frozenset[str] = OPEN_PATHS,
        allow: Callable[[Scope], bool] | None = None,
    ) -> None:
        self._app = app
        self._secret = secret.encode()
        self._open_paths = open_paths
        self._allow = allow
        challenge = _CHALLENGE if allow is None else f"{_CHALLENGE}, {WWW_AUTHENTICATE}"
        self._challenge = challenge.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or scope["path"] in self._open_paths:
            await self._app(scope, receive, send)
            return
        given = next((value for name, value in scope["headers"] if name == _HEADER), None)
        if secret_matches(self._secret, given):
            scope[CLUSTER_PEER_KEY] = True
            await self._app(scope, receive, send)
            return
        if self._allow is not None and self._allow(scope):
            await self._app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(_BODY)).encode()),
                    (b"www-authenticate", self._challenge),
                ],
            }
        )
        await send({"type": "http.response.body", "body": _BODY})


def is_cluster_peer(scope: Scope) -> bool:
    """Whether the request carried the cluster secret (see ``ClusterSecretMiddleware``)."""
    return scope.get(CLUSTER_PEER_KEY) is True
