"""The caller's credential, passed on to the coordinator's admin API.

The proxy forwards topic and group administration to the active controller; with security on
there, the controller authenticates and authorizes the END USER, not the proxy, so the proxy
sends along the ``Authorization`` header it received. ``ForwardCredential`` (ASGI middleware)
keeps the header in a context variable for the request's task; ``ForwardedAuth`` (an
``httpx.Auth`` for the proxy's ``AdminClient``) copies it onto each request made in that task.
A request made outside any caller's task carries no credential.
"""

from __future__ import annotations

from collections.abc import Generator
from contextvars import ContextVar

import httpx
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["ForwardCredential", "ForwardedAuth"]

_caller_authorization: ContextVar[str | None] = ContextVar("yak_caller_authorization", default=None)


class ForwardCredential:
    """Remembers the caller's ``Authorization`` header for the request's task."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for name, value in scope["headers"]:
                if name == b"authorization":
                    _caller_authorization.set(value.decode("latin-1"))
                    break
        await self.app(scope, receive, send)


class ForwardedAuth(httpx.Auth):
    """Sends the current caller's ``Authorization`` header (none: nothing is added)."""

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        header = _caller_authorization.get()
        if header is not None:
            request.headers["authorization"] = header
        yield request
