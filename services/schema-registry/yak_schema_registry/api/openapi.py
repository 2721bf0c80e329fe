"""The registry's OpenAPI document: FastAPI's, completed with what the routers do by hand.

- Every operation of Confluent's API declares, besides the statuses its router lists
  (``wire.error_responses``), those the app answers around the routes with Confluent's error
  body (``api.errors``): 405 with ``Allow``, and with security on 401 with
  ``WWW-Authenticate``, 403 and 429 with ``Retry-After``. The health checks need no credential;
  ``/readyz`` declares its own 200 and 503 bodies (``yak.web.health``).
- Links from each operation that names a subject's version to those that use it: a
  registration (``{"id"}``) to the schema by id and to the subject's versions, configs and
  modes (``latest`` standing for the version just made); a lookup (``{"subject", "version",
  "id"}``) to the same, with the version it found. Stateful testers and generated clients
  follow them.

Everything is built once, on the first request of ``/openapi.json``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from yak.web.openapi import error_responses, link_family, operations, readiness_answers
from yak_schema_registry.api.wire import MEDIA_TYPE

__all__ = ["install_openapi"]

_ERROR = "#/components/schemas/ErrorBody"
#: Statuses the app answers outside the routes (``api.errors``, ``api.security``).
_APP_STATUSES = ("401", "403", "405", "429")
_PUBLIC_PATHS = ("/healthz", "/readyz")
_SUBJECT = "/subjects/{subject}"
_REGISTER = (f"{_SUBJECT}/versions", "post", "200")
_LOOKUP = (_SUBJECT, "post", "200")
_SUBJECT_PREFIXES = (
    _SUBJECT,
    "/compatibility/subjects/{subject}",
    "/config/{subject}",
    "/mode/{subject}",
)
_BY_ID = "/schemas/ids/{schema_id}"
#: (operation that makes or finds a version, the paths below which it is used, how their path
#: parameters follow from the request and the answer).
_LINKS: tuple[tuple[tuple[str, str, str], tuple[str, ...], dict[str, str]], ...] = (
    (
        _REGISTER,
        _SUBJECT_PREFIXES,
        {"path.subject": "$request.path.subject", "path.version": "latest"},
    ),
    (_REGISTER, (_BY_ID,), {"path.schema_id": "$response.body#/id"}),
    (
        _LOOKUP,
        _SUBJECT_PREFIXES,
        {"path.subject": "$request.path.subject", "path.version": "$response.body#/version"},
    ),
    (_LOOKUP, (_BY_ID,), {"path.schema_id": "$response.body#/id"}),
)


def _complete(path: str, operation: dict[str, Any]) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    statuses = ("405",) if path in _PUBLIC_PATHS else _APP_STATUSES
    for status, answer in error_responses(statuses, _ERROR, media_type=MEDIA_TYPE).items():
        responses.setdefault(status, answer)
    if path == "/readyz":
        responses.update(readiness_answers())


def install_openapi(app: FastAPI) -> None:
    """Replace ``app.openapi`` with the builder above (cached after the first call)."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = get_openapi(title=app.title, version=app.version, routes=app.routes)
        for path, _method, operation in operations(document):
            _complete(path, operation)
        for source, prefixes, parameters in _LINKS:
            for prefix in prefixes:
                link_family(document, source, prefix, parameters)
        app.openapi_schema = document
        return document

    app.openapi = build  # type: ignore[method-assign]
