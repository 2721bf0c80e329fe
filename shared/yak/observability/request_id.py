"""The id of the request being served, carried across services in ``X-Request-Id``.

The ASGI middleware (``yak.observability.http``) takes the caller's ``X-Request-Id`` (or makes
one), puts it in a contextvar for the request's duration and returns it in the response
header. Log lines (``yak.observability.logging``) and outgoing calls read it from there:
``propagate_request_id`` is an httpx request event hook, and ``request_id_header`` gives the
raw header pair for clients that bypass httpx's client layer (the broker data plane).

The contextvar holds a mutable ``RequestScope`` rather than the id itself: tasks a handler
starts copy the context, and a long-lived one (the proxy's per-broker produce sender, which
sends records of many requests in one batch) would otherwise tag every later call with the
first request's id. The middleware marks the scope ended when the request ends, so such a task
sees the id only while that request is still being served.

An incoming id is kept only when it is short printable ASCII (``MAX_LENGTH``); anything else
is replaced by a fresh id, so a client cannot inject text into log lines. Pure, no I/O.
"""

from __future__ import annotations

import os
from contextvars import ContextVar, Token

import httpx

__all__ = [
    "MAX_LENGTH",
    "REQUEST_ID_HEADER",
    "RequestScope",
    "begin_request",
    "current_request_id",
    "end_request",
    "new_request_id",
    "propagate_request_id",
    "request_id_header",
    "valid_request_id",
]

REQUEST_ID_HEADER = "x-request-id"
_HEADER_BYTES = REQUEST_ID_HEADER.encode()
MAX_LENGTH = 128


class RequestScope:
    """One request's id, live until the middleware ends the request."""

    __slots__ = ("live", "request_id")

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.live = True


_current: ContextVar[RequestScope | None] = ContextVar("yak_request", default=None)


def new_request_id() -> str:
    """A fresh id: 16 random bytes in hex (as unique as a UUID, cheaper to make)."""
    return os.urandom(16).hex()


def valid_request_id(value: str) -> bool:
    """Whether a caller's id is kept: 1 to ``MAX_LENGTH`` printable ASCII characters."""
    return 0 < len(value) <= MAX_LENGTH and value.isascii() and value.isprintable()


def begin_request(request_id: str) -> tuple[RequestScope, Token[RequestScope | None]]:
    """Make ``request_id`` the current request's id (the middleware calls this)."""
    scope = RequestScope(request_id)
    return scope, _current.set(scope)


def end_request(scope: RequestScope, token: Token[RequestScope | None]) -> None:
    """The request is over: tasks that copied its context no longer see its id."""
    scope.live = False
    _current.reset(token)


def current_request_id() -> str | None:
    """The id of the request being served, or None outside a request."""
    scope = _current.get()
    return scope.request_id if scope is not None and scope.live else None


def request_id_header() -> tuple[bytes, bytes] | None:
    """``(b"x-request-id", id)`` for the current request, or None outside a request."""
    request_id = current_request_id()
    return None if request_id is None else (_HEADER_BYTES, request_id.encode())


async def propagate_request_id(request: httpx.Request) -> None:
    """httpx request hook: pass the current request's id on (unless the caller set one)."""
    request_id = current_request_id()
    if request_id is not None and REQUEST_ID_HEADER not in request.headers:
        request.headers[REQUEST_ID_HEADER] = request_id
