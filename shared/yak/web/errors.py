"""One table from typed errors to HTTP responses, for every Yak service's native API.

Error body: ``{"code": "<KAFKA_NAME>", "message": "<precise text>", "details": {...}}`` with the
status the error class declares (``YakError.http_status``). A path no route serves answers 404
``NOT_FOUND`` (405 ``METHOD_NOT_ALLOWED`` for another method, its ``Allow`` naming every method
the path is served with: ``yak.web.allow``) in the same shape. Request
validation failures become 400 ``INVALID_REQUEST`` naming the offending field; anything
unexpected becomes 500 ``UNKNOWN_SERVER_ERROR`` (logged with its traceback, never leaked to the
client). A 401
(``AuthenticationError``) carries the ``WWW-Authenticate`` challenge of the schemes Yak accepts
(RFC 9110 §11.6.1); a 429 (``ThrottlingQuotaExceededError`` and its kin) carries
``Retry-After`` from ``details["retry_after_s"]``. The Confluent v2-compatible API of the REST
proxy has its own table with numeric codes.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from yak.errors import AuthenticationError, InvalidRequestError, UnknownServerError, YakError
from yak.web.allow import allowed_methods

__all__ = [
    "WWW_AUTHENTICATE",
    "challenge_headers",
    "describe_validation",
    "error_response",
    "install_error_handlers",
]

log = logging.getLogger(__name__)

#: The challenge a 401 carries (RFC 9110 §11.6.1): both schemes Yak's APIs accept.
WWW_AUTHENTICATE = 'Bearer realm="yak", Basic realm="yak", charset="UTF-8"'


def challenge_headers(error: YakError) -> dict[str, str]:
    """``WWW-Authenticate`` for a 401, ``Retry-After`` for a 429 that says when; else none."""
    if isinstance(error, AuthenticationError):
        return {"WWW-Authenticate": WWW_AUTHENTICATE}
    if error.http_status == 429 and "retry_after_s" in error.details:
        return {"Retry-After": str(error.details["retry_after_s"])}
    return {}


def error_response(error: YakError) -> JSONResponse:
    """The HTTP response for a typed error."""
    return JSONResponse(
        error.to_dict(), status_code=error.http_status, headers=challenge_headers(error)
    )


def describe_validation(exc: RequestValidationError) -> str:
    """One line naming each field a request failed validation on."""
    parts = []
    for problem in exc.errors():
        where = ".".join(str(item) for item in problem.get("loc", ()) if item != "body")
        parts.append(f"{where or 'body'}: {problem.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def install_error_handlers(app: FastAPI) -> None:
    """Register the typed-error, validation and catch-all handlers on ``app``."""

    async def on_yak_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, YakError)
        return error_response(exc)

    async def on_validation_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return error_response(InvalidRequestError(describe_validation(exc)))

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error serving %s %s", request.method, request.url.path)
        return error_response(UnknownServerError(f"internal error: {type(exc).__name__}"))

    async def on_http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "HTTP_ERROR")
        message = f"{request.method} {request.url.path}: {exc.detail}"
        body = {"code": code, "message": message, "details": {}}
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = allowed_methods(request.app.router.routes, request.scope)
        return JSONResponse(body, status_code=exc.status_code, headers=headers)

    app.add_exception_handler(HTTPException, on_http_error)
    app.add_exception_handler(YakError, on_yak_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(Exception, on_unexpected)
