"""``ObservabilityMiddleware``: times every HTTP request and gives it a request id.

A pure ASGI middleware, outermost in every service (no Starlette request object, no
``BaseHTTPMiddleware``: the data plane pays one header scan, a contextvar set and reset, a
wrapped ``send`` and one histogram observation per request). For each HTTP request it

- takes the caller's ``X-Request-Id`` if valid, else makes one, sets it as the current request
  id (``yak.observability.request_id``) and adds it to the response headers;
- observes ``yak_http_request_duration_seconds{service, route, method, status}`` when the app
  returns — for a streamed response (SSE, long poll) that is when the stream ends. ``route`` is
  the template of the route that served it (``scope["route"]``, set by the router, or
  ``scope[ROUTE_TEMPLATE]``, set by an inner middleware that serves a route itself, as the
  proxy's fast lane does), or the first route template matching path and method when an inner
  middleware routed a copy of the scope (the proxy's trailing-slash stripping; a standby
  coordinator's forwarding) — remembered per method and path for the last 1,024 paths;
  ``<unmatched>`` for a path no route serves, so random paths cannot explode the label set.
  A request whose app raised counts with status 500, one whose client went away before the
  response started with status 499 (nginx's "client closed request");
- with ``YAK_ACCESS_LOG=true`` writes one line to the ``yak.access`` logger.

WebSocket and lifespan scopes pass through (lifespan startup also routes uvicorn's loggers
through the service's log handler, ``adopt_uvicorn_loggers``).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from fastapi.routing import iter_route_contexts
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from yak.observability.logs import ACCESS_LOGGER, access_log_enabled, adopt_uvicorn_loggers
from yak.observability.metrics import ServiceMetrics, metrics_route
from yak.observability.request_id import (
    REQUEST_ID_HEADER,
    begin_request,
    end_request,
    new_request_id,
    valid_request_id,
)

__all__ = [
    "ROUTE_TEMPLATE",
    "UNMATCHED",
    "ObservabilityMiddleware",
    "Observed",
    "install_observability",
    "route_template",
]

UNMATCHED = "<unmatched>"
#: The scope key through which a middleware serving a route itself names the route's template.
ROUTE_TEMPLATE = "yak.route_template"
_MATCHES_KEPT = 1024
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_HEADER = REQUEST_ID_HEADER.encode()
_access_log = logging.getLogger(ACCESS_LOGGER)


def route_template(scope: Scope, routes: _Templates | None = None) -> str:
    """The path template of the route that served ``scope`` (see the module doc)."""
    served: str | None = scope.get(ROUTE_TEMPLATE)
    if served is not None:
        return served
    route = scope.get("route")
    if route is not None:
        template = getattr(route, "path_format", None) or getattr(route, "path", None)
        if isinstance(template, str) and template:
            return template
    return routes.match(scope) if routes is not None else UNMATCHED


class _Templates:
    """The app's route templates as regular expressions, for scopes routed as a copy."""

    def __init__(self, routes: Callable[[], Sequence[BaseRoute]]) -> None:
        self._routes = routes
        self._seen = -1
        self._compiled: list[tuple[re.Pattern[str], frozenset[str] | None, str]] = []
        self._matched: dict[tuple[str, str], str] = {}

    def _compile(self) -> None:
        routes = self._routes()
        if len(routes) == self._seen:
            return
        compiled = []
        for context in iter_route_contexts(routes):
            path = context.path_format or context.path
            if not path:
                continue
            if isinstance(context.original_route, Mount):
                pattern, _, _ = compile_path(path.rstrip("/") + "/{rest:path}")
            else:
                pattern, _, _ = compile_path(path)
            methods = frozenset(context.methods) if context.methods else None
            compiled.append((pattern, methods, path))
        self._compiled, self._seen = compiled, len(routes)
        self._matched = {}

    def match(self, scope: Scope) -> str:
        self._compile()
        path: str = scope.get("path", "")
        method: str = scope.get("method", "GET")
        key = (method, path)
        found = self._matched.get(key)
        if found is None:
            found = self._scan(path, method)
            if len(self._matched) >= _MATCHES_KEPT:
                del self._matched[next(iter(self._matched))]  # the oldest
            self._matched[key] = found
        return found

    def _scan(self, path: str, method: str) -> str:
        for candidate in (path, path.rstrip("/") or "/"):
            for pattern, methods, template in self._compiled:
                if pattern.match(candidate) and (methods is None or method in methods):
                    return template
        return UNMATCHED


class ObservabilityMiddleware:
    """See the module doc. ``routes`` returns the app's routes (read after startup)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: ServiceMetrics,
        routes: Callable[[], Sequence[BaseRoute]] = lambda: (),
        access_log: bool | None = None,
    ) -> None:
        self._app = app
        self._metrics = metrics
        self._templates = _Templates(routes)
        self._access_log = access_log_enabled() if access_log is None else access_log
        self._children: dict[tuple[str, str, int], Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                adopt_uvicorn_loggers()
            await self._app(scope, receive, send)
            return
        with self.observing(scope) as observed:
            header = observed.header

            async def send_with_id(message: Message) -> None:
                if message["type"] == "http.response.start":
                    observed.status = message["status"]
                    message["headers"] = [*message.get("headers", ()), header]
                await send(message)

            await self._app(scope, receive, send_with_id)

    def observing(self, scope: Scope) -> Observed:
        """One request's observation: its id current (``Observed.header`` for the answer),
        counted with ``Observed.status`` when it ends — 499 if the answer never started or the
        request was cancelled, 500 if it raised first. For a route served outside the
        middleware too (``yak.web.direct``)."""
        return Observed(self, scope)

    @staticmethod
    def request_id(scope: Scope) -> str:
        """The caller's ``X-Request-Id`` if valid, else a new one."""
        given = next((v for k, v in scope["headers"] if k == _HEADER), None)
        request_id = given.decode("latin-1") if given is not None else ""
        return request_id if valid_request_id(request_id) else new_request_id()

    def observe(self, scope: Scope, status: int, elapsed: float) -> None:
        """Count a request answered with ``status`` after ``elapsed`` seconds (and its access
        log line): for a route served outside the middleware (``yak.web.direct``) too."""
        route = route_template(scope, self._templates)
        method: str = scope["method"]
        if method not in _METHODS:
            method = "OTHER"  # any token is a valid method: keep the label set bounded
        key = (route, method, status)
        child = self._children.get(key)
        if child is None:
            child = self._metrics.http_duration.labels(
                self._metrics.service, route, method, str(status)
            )
            self._children[key] = child
        child.observe(elapsed)
        if self._access_log:
            _access_log.info(
                "%s %s %d %.1f ms",
                method,
                scope.get("path", ""),
                status,
                elapsed * 1000,
                extra={
                    "method": method,
                    "route": route,
                    "path": scope.get("path", ""),
                    "status": status,
                    "duration_ms": round(elapsed * 1000, 3),
                },
            )


def install_observability(app: Starlette, metrics: ServiceMetrics) -> None:
    """Serve ``GET /metrics`` and put the middleware outermost (call it last in a factory)."""
    app.router.routes.append(metrics_route(metrics))
    app.add_middleware(ObservabilityMiddleware, metrics=metrics, routes=lambda: app.router.routes)


class Observed:
    """A request being observed (``ObservabilityMiddleware.observing``): a context manager."""

    __slots__ = ("_middleware", "_request", "_scope", "_start", "_token", "header", "status")

    def __init__(self, middleware: ObservabilityMiddleware, scope: Scope) -> None:
        self._middleware = middleware
        self._scope = scope
        request_id = middleware.request_id(scope)
        #: The response header naming the request.
        self.header = (_HEADER, request_id.encode())
        #: The answer's status, once it started (0: not yet).
        self.status = 0
        self._request, self._token = begin_request(request_id)
        self._start = time.perf_counter()

    def __enter__(self) -> Observed:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: object
    ) -> None:
        status = self.status
        if not status and kind is not None and not issubclass(kind, asyncio.CancelledError):
            status = 500 if issubclass(kind, Exception) else 0
        try:
            self._middleware.observe(self._scope, status or 499, time.perf_counter() - self._start)
        finally:
            end_request(self._request, self._token)
