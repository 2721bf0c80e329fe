"""One table from errors to Confluent's error bodies: ``{"error_code": N, "message": "..."}``.

A ``RegistryError`` answers with its status and Confluent's ``error_code``; a metadata-store
failure (etcd unreachable) 500 / 50001 ("error in the backend data store"); a body or
parameter that fails validation 422 / 422, as Confluent's Jersey validation does; a path no
route serves 404 / 404 and another method 405 / 405 (with ``Allow`` naming every method the
path serves, not only those of the first route that matched it); with security on, a missing
or bad credential 401 / 40101, too many failed logins 429 / 42901, a denied operation 403 /
40301 (``api.security``); anything else 500 / 50001, logged with its traceback and never
leaked. Every body has Confluent's content type.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from yak.errors import (
    AuthenticationError,
    AuthenticationThrottledError,
    AuthorizationError,
    MetadataStoreError,
    YakError,
)
from yak.web.errors import describe_validation
from yak_schema_registry.api.wire import RegistryJSONResponse
from yak_schema_registry.errors import RegistryError

__all__ = ["allowed_methods", "error_body", "install_registry_error_handlers"]

log = logging.getLogger(__name__)

_BACKEND = 50001
#: Security's errors: status and Confluent's error code.
_SECURITY: dict[type[YakError], tuple[int, int]] = {
    AuthenticationError: (401, 40101),
    AuthenticationThrottledError: (429, 42901),
    AuthorizationError: (403, 40301),
}


def error_body(error_code: int, message: str) -> dict[str, object]:
    return {"error_code": error_code, "message": message}


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def allowed_methods(routes: Sequence[BaseRoute], scope: Scope) -> str:
    """Every method some route fully matches for the request's path, for a 405's ``Allow``
    (asked of the routes themselves: included routers match their own routes)."""
    allowed = [
        method
        for method in _METHODS
        if any(route.matches({**scope, "method": method})[0] is Match.FULL for route in routes)
    ]
    return ", ".join(allowed)


def install_registry_error_handlers(app: FastAPI) -> None:
    """Register the handlers of the module doc on ``app``."""

    async def on_registry_error(_request: Request, exc: Exception) -> RegistryJSONResponse:
        assert isinstance(exc, RegistryError)
        body = error_body(exc.error_code, exc.message)
        return RegistryJSONResponse(body, status_code=exc.http_status)

    async def on_security_error(_request: Request, exc: Exception) -> RegistryJSONResponse:
        assert isinstance(exc, YakError)
        status, error_code = next(v for kind, v in _SECURITY.items() if isinstance(exc, kind))
        headers = {"WWW-Authenticate": 'Basic realm="yak"'} if status == 401 else None
        body = error_body(error_code, exc.message)
        return RegistryJSONResponse(body, status_code=status, headers=headers)

    async def on_store_error(_request: Request, exc: Exception) -> RegistryJSONResponse:
        message = f"Error in the backend data store: {exc}"
        return RegistryJSONResponse(error_body(_BACKEND, message), status_code=500)

    async def on_validation_error(_request: Request, exc: Exception) -> RegistryJSONResponse:
        assert isinstance(exc, RequestValidationError)
        return RegistryJSONResponse(error_body(422, describe_validation(exc)), status_code=422)

    async def on_http_error(request: Request, exc: Exception) -> RegistryJSONResponse:
        assert isinstance(exc, HTTPException)
        message = f"HTTP {exc.status_code} {exc.detail}: {request.method} {request.url.path}"
        body = error_body(exc.status_code, message)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = allowed_methods(request.app.router.routes, request.scope)
        return RegistryJSONResponse(body, status_code=exc.status_code, headers=headers)

    async def on_unexpected(request: Request, exc: Exception) -> RegistryJSONResponse:
        log.exception("unhandled error serving %s %s", request.method, request.url.path)
        message = f"Internal error: {type(exc).__name__}"
        return RegistryJSONResponse(error_body(_BACKEND, message), status_code=500)

    app.add_exception_handler(RegistryError, on_registry_error)
    for error in _SECURITY:
        app.add_exception_handler(error, on_security_error)
    app.add_exception_handler(MetadataStoreError, on_store_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(HTTPException, on_http_error)
    app.add_exception_handler(Exception, on_unexpected)
