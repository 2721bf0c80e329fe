"""The proxy's OpenAPI document: FastAPI's, completed with what the routes do by hand.

- Request bodies that routes read themselves (``body.read_body``) are declared with
  ``openapi_body``; their schemas travel in an ``x-yak-components`` key of the operation and are
  moved into ``components/schemas`` here, so every ``$ref`` resolves.
- Success answers of the Confluent v2 dialect are negotiated (``content.negotiate``): besides
  ``application/json`` they may be ``application/vnd.kafka.v2+json``, and records the consumer's
  ``application/vnd.kafka.{json,binary}.v2+json``. Each is declared with the same schema.
- Every operation declares the error statuses its dialect may answer, with the dialect's error
  body (``{"error_code", "message"}`` or ``{"code", "message", "details"}``), replacing FastAPI's
  default 422 body, which the proxy never sends.
- A native produce that takes an ``Idempotency-Key`` declares 422 too
  (``IDEMPOTENCY_KEY_REUSED``; the other native 4xx validation answers are 400).
- The Server-Sent Events stream declares ``text/event-stream``, each event an object (``event``:
  ``records`` or ``error``, ``data``: JSON text), as SSE-aware tools read a stream.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from yak_rest_proxy.http.errors import NATIVE_PREFIXES

__all__ = ["install_openapi"]

_V2_ERROR = {
    "title": "V2Error",
    "type": "object",
    "required": ["error_code", "message"],
    "properties": {"error_code": {"type": "integer"}, "message": {"type": "string"}},
}
_NATIVE_ERROR = {
    "title": "NativeError",
    "type": "object",
    "required": ["code", "message"],
    "properties": {
        "code": {"type": "string"},
        "message": {"type": "string"},
        "details": {"type": "object"},
    },
}
#: Statuses each dialect answers errors with (``errors.v2_error``; ``YakError.http_status``).
_V2_STATUSES = ("400", "401", "403", "404", "406", "409", "413", "415", "416", "421", "422", "500")
_NATIVE_STATUSES = (
    *("400", "401", "403", "404", "405", "406", "409", "413", "415", "416", "421"),
    *("500", "503", "504"),
)
_V2_TYPES = ("application/vnd.kafka.v2+json",)
_V2_RECORD_TYPES = ("application/vnd.kafka.json.v2+json", "application/vnd.kafka.binary.v2+json")
#: Paths that need no credential even with security on (``security.route_acls``).
_PUBLIC_PATHS = ("/healthz", "/readyz")
_ERROR_DESCRIPTION = "Error (see docs/rest-api.md for the codes)"


def _is_native(path: str) -> bool:
    return path.startswith(NATIVE_PREFIXES)  # health and docs paths are among them


#: One event of the member's stream (``: idle`` comments carry none): ``records`` with a poll
#: answer, or ``error`` with the native error body, as JSON text in ``data``.
_SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "enum": ["records", "error"]},
        "data": {"type": "string", "description": "JSON: a poll answer, or an error body"},
    },
    "required": ["event", "data"],
}


def _takes_idempotency_key(operation: dict[str, Any]) -> bool:
    parameters = operation.get("parameters", ())
    return any(p.get("name") == "Idempotency-Key" for p in parameters if isinstance(p, dict))


def _complete(path: str, method: str, operation: dict[str, Any], schemas: dict[str, Any]) -> None:
    schemas.update(operation.pop("x-yak-components", {}))
    responses: dict[str, Any] = operation.setdefault("responses", {})
    native = _is_native(path)
    for status, response in responses.items():
        content = response.get("content")
        if not status.startswith("2") or not isinstance(content, dict) or native:
            continue
        json_content = content.get("application/json")
        if json_content is None:
            continue
        extra = _V2_TYPES + (_V2_RECORD_TYPES if path.endswith("/records") else ())
        for media in extra:
            content.setdefault(media, copy.deepcopy(json_content))
    if path.endswith("/stream") and method == "get":
        responses["200"] = {
            "description": "Server-Sent Events: `records` events, `error` then the end",
            "content": {"text/event-stream": {"schema": _SSE_EVENT}},
        }
    if native:
        responses.pop("422", None)  # validation failures are 400 INVALID_REQUEST here
    error = {"$ref": "#/components/schemas/" + ("NativeError" if native else "V2Error")}
    statuses = _NATIVE_STATUSES if native else _V2_STATUSES
    if native and _takes_idempotency_key(operation):
        statuses = (*statuses, "422")  # IDEMPOTENCY_KEY_REUSED
    for status in statuses:
        if status in ("401", "403") and path in _PUBLIC_PATHS:
            continue
        responses[status] = {
            "description": _ERROR_DESCRIPTION,
            "content": {"application/json": {"schema": error}},
        }


def install_openapi(app: FastAPI) -> None:
    """Replace ``app.openapi`` with the builder above (cached after the first call)."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        schemas["V2Error"] = _V2_ERROR
        schemas["NativeError"] = _NATIVE_ERROR
        for path, operations in document.get("paths", {}).items():
            for method, operation in operations.items():
                if isinstance(operation, dict):
                    _complete(path, method, operation, schemas)
        for unused in ("HTTPValidationError", "ValidationError"):
            schemas.pop(unused, None)
        app.openapi_schema = document
        return document

    app.openapi = build  # type: ignore[method-assign]
