"""The coordinator's OpenAPI document: FastAPI's, completed with what the server enforces.

- Names in paths and request bodies carry the pattern and limits of the validators the
  handlers run (``yak.web.openapi``: topics, groups, users; principals ``User:<name>``),
  config names the catalogue, partition counts their bound.
- Every operation declares the error statuses the coordinator may answer, each with Yak's
  native body ``{"code", "message", "details"}`` (``yak.web.errors``): request validation is
  400 ``INVALID_REQUEST``, never FastAPI's 422, whose body and schemas are dropped; 405 with
  ``Allow``; 413 past the admin body limit; 429 with ``Retry-After`` (authentication
  throttling); 503 ``NOT_CONTROLLER`` from a standby with no active controller to forward to.
- Links from each operation that creates an object to those that use it (topic, share
  group, user, API key), so that generated clients and stateful tests can chain them.

The health checks need no credential, so they declare no 401/403; ``/readyz`` declares its own
200 and 503 bodies (``yak.web.health``), not the error body.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from yak.api.admin import ADMIN_PREFIX
from yak.web.openapi import (
    changes_topic,
    constrain_bodies,
    constrain_parameters,
    constrain_properties,
    error_responses,
    link_family,
    name_schema,
    operations,
    principal_schema,
    readiness_answers,
    request_property_schema,
    user_topic_schema,
)

__all__ = ["install_openapi"]

_ERROR = {
    "title": "Error",
    "type": "object",
    "required": ["code", "message"],
    "properties": {
        "code": {"type": "string"},
        "message": {"type": "string"},
        "details": {"type": "object"},
    },
}
_STATUSES = (
    *("400", "401", "403", "404", "405", "408", "409", "413", "415", "429"),
    *("500", "503", "504"),
)
_PUBLIC_STATUSES = ("404", "405", "500", "503")
_PUBLIC_PATHS = ("/healthz", "/readyz", "/metrics")
_NAMES = {"name": "Topic", "group_id": "Group", "user": "User"}
_P = ADMIN_PREFIX
#: (operation that creates, the paths below which the object is used, parameters from it).
_LINKS: tuple[tuple[tuple[str, str, str], str, dict[str, str]], ...] = (
    (
        (f"{_P}/topics", "post", "201"),
        f"{_P}/topics/{{name}}",
        {"path.name": "$response.body#/name"},
    ),
    (
        (f"{_P}/share-groups", "post", "201"),
        f"{_P}/share-groups/{{group_id}}",
        {"path.group_id": "$response.body#/name"},
    ),
    (
        (f"{_P}/security/users", "post", "201"),
        f"{_P}/security/users/{{user}}",
        {"path.user": "$response.body#/user/name"},
    ),
    (
        (f"{_P}/security/users/{{user}}/keys", "post", "201"),
        f"{_P}/security/users/{{user}}/keys/{{key_id}}",
        {"path.user": "$request.path.user", "path.key_id": "$response.body#/api_key/key_id"},
    ),
)


def _parameter_schema(path: str, method: str, where: str, name: str) -> dict[str, Any] | None:
    if where != "path":
        return None
    if name == "name" and changes_topic(path, method):
        return user_topic_schema()
    if name == "principal":
        return principal_schema()
    if name == "broker_id":  # routes._broker_id
        return {"type": "integer", "minimum": 0}
    if name in _NAMES:
        return name_schema(_NAMES[name])
    return None


def _complete(path: str, operation: dict[str, Any]) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    responses.pop("422", None)  # validation failures are 400 INVALID_REQUEST
    statuses = _PUBLIC_STATUSES if path in _PUBLIC_PATHS else _STATUSES
    responses.update(error_responses(statuses, "#/components/schemas/Error"))
    if path == "/readyz":
        responses.update(readiness_answers())


def install_openapi(app: FastAPI) -> None:
    """Replace ``app.openapi`` with the builder above (cached after the first call)."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = get_openapi(title=app.title, version=app.version, routes=app.routes)
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        for unused in ("HTTPValidationError", "ValidationError"):
            schemas.pop(unused, None)
        schemas["Error"] = _ERROR
        for path, _method, operation in operations(document):
            _complete(path, operation)
        constrain_parameters(document, _parameter_schema)
        constrain_properties(document, request_property_schema)
        constrain_bodies(document)
        for source, prefix, parameters in _LINKS:
            link_family(document, source, prefix, parameters)
        app.openapi_schema = document
        return document

    app.openapi = build  # type: ignore[method-assign]
