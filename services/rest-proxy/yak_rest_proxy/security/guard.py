"""The guard: ``yak.web.route_guard`` enforcing ``route_acls.ROUTE_ACLS`` on the proxy.

Installed as an app-wide dependency only when security is on (``YAK_SECURITY=on``); its typed
errors go through the proxy's one error table in the path's dialect (401 with
``WWW-Authenticate``, 403 ``*_AUTHORIZATION_FAILED``). A WebSocket is refused before it is
accepted (close code 1008, which the server sends as HTTP 403).

Credentials: ``Authorization: Bearer <api key>`` or ``Authorization: Basic <user:password>``;
without an ``Authorization`` header — the proxy's own addition — a client certificate verified
by the listener's CA (``YAK_TLS_CLIENT_AUTH=optional|required``) names the principal: subject
CN ``alice`` is ``User:alice`` (``yak.web.tls``), and a CN that is not a valid user name is
refused. For checks on topics named in a JSON body, the guard reads the body (up to
``BODY_LIMIT``) and leaves it for the handler.
"""

from __future__ import annotations

from starlette.requests import HTTPConnection

from yak.errors import AuthenticationError
from yak.security.acl import user_name, user_principal
from yak.security.cache import SecurityCache
from yak.web.route_guard import ANONYMOUS, BODY_LIMIT, RouteGuard, header_principal
from yak.web.tls import tls_peer_cn
from yak_rest_proxy.security.access import current_access
from yak_rest_proxy.security.route_acls import AUDITED, PATH_PARAMS, ROUTE_ACLS

__all__ = ["ANONYMOUS", "BODY_LIMIT", "Guard"]


class Guard(RouteGuard):
    """The app-wide dependency; see the module docstring."""

    def __init__(self, cache: SecurityCache) -> None:
        async def security() -> SecurityCache:
            return cache

        super().__init__(
            ROUTE_ACLS,
            audited=AUDITED,
            path_params=PATH_PARAMS,
            access=current_access,
            security=security,
            authenticate=_principal,
        )


async def _principal(cache: SecurityCache, conn: HTTPConnection) -> str:
    """The ``Authorization`` header's principal; without one, the client certificate's."""
    if not conn.headers.get("authorization") and (cn := tls_peer_cn(conn.scope)) is not None:
        return _certificate_principal(cn)
    return await header_principal(cache, conn)


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
