"""The console's app factory: server-rendered pages (Jinja2 + htmx), live updates over SSE.

The console is a client of the public API like any user (``ConsoleRuntime``): it holds no
state of its own beyond the sampler's recent history. Pages live in ``pages/`` (one router
module each); static files, with the front-end libraries vendored from npm, in ``static/``.
Errors of the public API (``YakError``) become an error page with the API's status and code,
or for an htmx request a fragment that the page shows in place. ``/readyz`` is ready once the
sampler reached the public API; ``/metrics`` serves the HTTP and process metrics
(docs/observability.md), and calls to the API carry the request's ``X-Request-Id``. With security on
(``YAK_SECURITY=on``) the guard (``auth/guard.py``) needs a session on every page and a CSRF
token on every POST; ``/login`` opens sessions; a 401 from the API during a session (a revoked
key, a deleted user) ends it and sends the browser back to the login page.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from yak import __version__
from yak.errors import AuthenticationError, YakError
from yak.observability.http import install_observability
from yak.observability.metrics import ServiceMetrics
from yak.web.errors import describe_validation
from yak.web.health import health_router
from yak_console.auth.guard import ConsoleGuard, LoginRequiredError
from yak_console.auth.sessions import SessionSigner, SessionStore
from yak_console.pages import (
    brokers,
    browse,
    events,
    groups,
    login,
    overview,
    produce,
    queues,
    schemas,
    topics,
)
from yak_console.pages.common import Pages
from yak_console.runtime import ConsoleRuntime
from yak_console.settings import ConsoleSettings

__all__ = ["create_app", "page_routers"]

_STATIC = Path(__file__).resolve().parent / "static"


def create_app(
    settings: ConsoleSettings | None = None,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    registry_transport: httpx.AsyncBaseTransport | None = None,
) -> FastAPI:
    """Build the console ASGI app (``transport`` reaches the public API in tests,
    ``registry_transport`` the schema registry)."""
    settings = settings or ConsoleSettings.from_env()
    runtime = ConsoleRuntime(settings, transport=transport, registry_transport=registry_transport)
    metrics = ServiceMetrics("console")
    sessions = None
    if settings.security:
        signer = SessionSigner(settings.session_secret)
        idle_s, max_s = settings.session_idle_s, settings.session_max_s
        sessions = SessionStore(signer, idle_s=idle_s, max_s=max_s)
    pages = Pages(runtime, sessions)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await runtime.start()
        try:
            async with metrics.loop_lag.running():
                yield
        finally:
            if sessions is not None:
                await sessions.aclose()
            await runtime.stop()

    app = FastAPI(
        title="Yak console",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        dependencies=[Depends(ConsoleGuard(sessions))] if sessions is not None else [],
    )
    app.state.runtime = runtime
    app.include_router(health_router("console", runtime.readiness))
    app.mount("/static", StaticFiles(directory=_STATIC), name="static")

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        return Response((_STATIC / "favicon.svg").read_bytes(), media_type="image/svg+xml")

    for router in page_routers(pages):
        app.include_router(router)
    if sessions is not None:
        app.include_router(login.router(pages))

    @app.exception_handler(LoginRequiredError)
    async def on_login_required(request: Request, exc: Exception) -> Response:
        return login.login_redirect(request)

    @app.exception_handler(YakError)
    async def on_yak_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, YakError)
        session = pages.session(request)
        if isinstance(exc, AuthenticationError) and sessions is not None and session is not None:
            await sessions.end(session)  # the user's credential no longer works
            return login.login_redirect(request, expired=True)
        return _error(pages, request, exc.http_status, exc.code, exc.message)

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, exc: Exception) -> HTMLResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = "NOT_FOUND" if exc.status_code == 404 else f"HTTP_{exc.status_code}"
        return _error(pages, request, exc.status_code, code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(request: Request, exc: Exception) -> HTMLResponse:
        assert isinstance(exc, RequestValidationError)
        return _error(pages, request, 400, "INVALID_REQUEST", describe_validation(exc))

    install_observability(app, metrics)  # outermost: times and ids every request
    return app


def page_routers(pages: Pages) -> list[APIRouter]:
    """Every page's router (the tests walk their routes)."""
    modules = (overview, topics, browse, produce, groups, queues, brokers, schemas, events)
    return [module.router(pages) for module in modules]


def _error(pages: Pages, request: Request, status: int, code: str, message: str) -> HTMLResponse:
    if request.headers.get("hx-request"):
        return pages.render(request, "_error.html", status_code=status, code=code, message=message)
    return pages.render(
        request, "error.html", status_code=status, code=code, message=message, title="Error"
    )
