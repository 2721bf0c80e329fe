"""Typed errors to HTTP, in the two dialects the proxy speaks.

* **Confluent v2** (every path outside ``/api/`` and ``/admin/``): body
  ``{"error_code": <int>, "message": "..."}`` with Confluent's numeric codes, so existing
  REST-proxy clients recognise them. The table below is the whole mapping; codes Confluent
  does not have are Yak's own and listed in ``docs/rest-api.md``.
* **Native** (``/api/v1``): Yak's ``{"code": "<KAFKA_NAME>", "message", "details"}`` with the
  status the error class declares (``yak.web.errors``), the same as every other Yak service.

Handlers raise typed ``YakError``s; nothing below the routes builds a response.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from yak.errors import InvalidRequestError, UnknownServerError, YakError
from yak.web.allow import allowed_methods
from yak.web.errors import WWW_AUTHENTICATE, challenge_headers, describe_validation, error_response

__all__ = [
    "NATIVE_PREFIXES",
    "WWW_AUTHENTICATE",
    "install_error_handlers",
    "v2_error",
    "v2_error_response",
]

log = logging.getLogger(__name__)

#: Paths answered in the native dialect; everything else is Confluent v2.
NATIVE_PREFIXES = ("/api/", "/admin/", "/healthz", "/readyz", "/openapi", "/docs")

_BY_CODE: dict[str, tuple[int, int]] = {
    "UNKNOWN_MEMBER_ID": (404, 40403),
    "GROUP_ID_NOT_FOUND": (404, 40405),
    "LEADER_NOT_AVAILABLE": (404, 40404),
    "NOT_ACCEPTABLE": (406, 40601),
    "CONSUMER_INSTANCE_EXISTS": (409, 40902),
    "ILLEGAL_STATE": (409, 40903),
    "FENCED_MEMBER_EPOCH": (409, 40903),
    "ILLEGAL_GENERATION": (409, 40903),
    "NON_EMPTY_GROUP": (409, 40903),
    "INVALID_TOPIC_EXCEPTION": (400, 40002),
    "INVALID_GROUP_ID": (400, 40002),
    "TOPIC_ALREADY_EXISTS": (400, 40002),
    "INVALID_CONFIG": (422, 42204),
    "MESSAGE_TOO_LARGE": (413, 41301),
    "TOO_MANY_RECORDS": (413, 41302),
    "REQUEST_BODY_TIMEOUT": (408, 40801),
    # Confluent's rate limiter answers 429 with 42901; the consumer cap is Yak's own.
    "THROTTLING_QUOTA_EXCEEDED": (429, 42901),
    "CONSUMER_QUOTA_EXCEEDED": (429, 42902),
    "AUTHENTICATION_THROTTLED": (429, 42903),
    "UNSUPPORTED_MEDIA_TYPE": (415, 41501),
    "OFFSET_OUT_OF_RANGE": (416, 41601),
    # Confluent's rest-utils: 40101 for any authentication failure, 40301 for any denial.
    "UNAUTHENTICATED": (401, 40101),
    "TOPIC_AUTHORIZATION_FAILED": (403, 40301),
    "GROUP_AUTHORIZATION_FAILED": (403, 40301),
    "CLUSTER_AUTHORIZATION_FAILED": (403, 40301),
    "IDEMPOTENCY_KEY_IN_USE": (409, 40904),
    "IDEMPOTENCY_KEY_REUSED": (422, 42206),
    "RESOURCE_NOT_FOUND": (404, 404),
    "DUPLICATE_RESOURCE": (409, 409),
    # The schema formats (``yak_rest_proxy.schemas.errors``): Confluent's codes.
    "SCHEMA_REGISTRY_NOT_CONFIGURED": (415, 41501),
    "SCHEMA_REGISTRY_UNAVAILABLE": (408, 40801),
    "INVALID_SCHEMA": (422, 42205),
    "RECORD_CONVERSION_FAILED": (422, 42203),
    "RECORD_DESERIALIZATION_FAILED": (500, 50002),
}

_INVALID_REQUEST: dict[str, tuple[int, int]] = {
    "malformed_json": (400, 400),
    "invalid_data": (422, 42205),
    "invalid_config": (422, 42204),
    "config_constraint": (400, 40001),
}


def v2_error(error: YakError) -> tuple[int, int]:
    """(HTTP status, Confluent ``error_code``) of a typed error."""
    if error.code == "UNKNOWN_TOPIC_OR_PARTITION":
        return (404, 40402) if "partition" in error.details else (404, 40401)
    if isinstance(error, InvalidRequestError):
        return _INVALID_REQUEST.get(str(error.details.get("kind")), (422, 422))
    if error.code == "SCHEMA_MISSING":  # Confluent: 42201 key schema, 42202 value schema
        return (422, 42201) if error.details.get("field") == "key" else (422, 42202)
    found = _BY_CODE.get(error.code)
    if found is not None:
        return found
    if error.http_status < 500:
        return error.http_status, error.http_status
    return (500, 50003) if error.retriable else (500, 50002)


def v2_error_response(error: YakError) -> JSONResponse:
    status, code = v2_error(error)
    return JSONResponse({"error_code": code, "message": error.message}, status_code=status)


def _native(request: Request) -> bool:
    return request.url.path.startswith(NATIVE_PREFIXES)


def _respond(request: Request, error: YakError) -> Response:
    if _native(request):
        return error_response(error)
    response = v2_error_response(error)
    response.headers.update(challenge_headers(error))
    return response


def install_error_handlers(app: FastAPI) -> None:
    """Typed errors, validation failures and anything unexpected, in the path's dialect."""

    async def on_yak_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, YakError)
        return _respond(request, exc)

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return _respond(request, InvalidRequestError(describe_validation(exc)))

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error serving %s %s", request.method, request.url.path)
        return _respond(request, UnknownServerError(f"internal error: {type(exc).__name__}"))

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        message = f"{request.method} {request.url.path}: {exc.detail}"
        if _native(request):
            code = "NOT_FOUND" if exc.status_code == 404 else "METHOD_NOT_ALLOWED"
            body: dict[str, object] = {"code": code, "message": message}
        else:
            body = {"error_code": exc.status_code, "message": message}
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # every method the path serves, not the first route's
            headers["Allow"] = allowed_methods(request.app.router.routes, request.scope)
        return JSONResponse(body, status_code=exc.status_code, headers=headers)

    app.add_exception_handler(HTTPException, on_http_error)
    app.add_exception_handler(YakError, on_yak_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(Exception, on_unexpected)
