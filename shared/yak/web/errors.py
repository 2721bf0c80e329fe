"""One table from typed errors to HTTP responses, for every Yak service's native API.

Error body: ``{"code": "<KAFKA_NAME>", "message": "<precise text>", "details": {...}}`` with the
status the error class declares (``YakError.http_status``). Request validation failures become
400 ``INVALID_REQUEST`` naming the offending field; anything unexpected becomes 500
``UNKNOWN_SERVER_ERROR`` (logged with its traceback, never leaked to the client). The Confluent
v2-compatible API of the REST proxy has its own table with numeric codes.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from yak.errors import InvalidRequestError, UnknownServerError, YakError

__all__ = ["describe_validation", "error_response", "install_error_handlers"]

log = logging.getLogger(__name__)


def error_response(error: YakError) -> JSONResponse:
    """The HTTP response for a typed error."""
    return JSONResponse(error.to_dict(), status_code=error.http_status)


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

    app.add_exception_handler(YakError, on_yak_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(Exception, on_unexpected)
