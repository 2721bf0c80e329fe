"""The fast lane: the hottest route served without FastAPI's routing and parameter handling.

A one-record produce through FastAPI spends more time in the framework — matching the path
against every route, building the request, solving the parameters and dependencies, the
exception middleware — than in the produce itself. ``FastLane`` is a raw ASGI middleware,
innermost, that serves ``POST /api/v1/topics/{topic}/records`` straight from the scope when
the request is the plain case: no query parameter but ``acks`` with one of its four values,
and security off (the guard is a FastAPI dependency: a secured proxy takes the FastAPI path).
Anything else passes through to FastAPI untouched, so every unusual request (a bad ``acks``,
an unknown parameter, a topic with a ``/``) is answered exactly as the documented route
answers it. The work is the route's own (``routes.produce_records``), typed errors go through
the native dialect's table, and the route stays in the OpenAPI document. The observability
middleware outside still times and ids the request (it matches the route's template itself).
"""

from __future__ import annotations

import re

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from yak.errors import YakError
from yak.web.errors import error_response
from yak_rest_proxy.native.routes import ACKS, produce_records
from yak_rest_proxy.runtime import ProxyRuntime

__all__ = ["FastLane"]

_PRODUCE = re.compile(r"/api/v1/topics/([^/]+)/records")
_ACKS_QUERY = {b"": -1, **{b"acks=" + name.encode(): value for name, value in ACKS.items()}}


class FastLane:
    """See the module docstring."""

    def __init__(self, app: ASGIApp, runtime: ProxyRuntime) -> None:
        self.app = app
        self._runtime = runtime
        #: Requests this lane served itself (the rest went on to FastAPI).
        self.served = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and self._runtime.security_cache is None
        ):
            match = _PRODUCE.fullmatch(scope["path"])
            acks = _ACKS_QUERY.get(scope["query_string"]) if match is not None else None
            if match is not None and acks is not None:
                self.served += 1
                try:
                    response = await produce_records(
                        self._runtime, Request(scope, receive), match.group(1), acks
                    )
                except YakError as exc:
                    response = error_response(exc)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
