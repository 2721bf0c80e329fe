"""The proxy's OpenAPI document: FastAPI's, plus the request bodies routes read by hand.

Routes that parse their own bodies (``body.read_body``) declare them with ``openapi_body``,
whose schemas travel in an ``x-yak-components`` key of the operation; this moves them into
``components/schemas`` so every ``$ref`` resolves.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

__all__ = ["install_openapi"]


def install_openapi(app: FastAPI) -> None:
    """Replace ``app.openapi`` with the builder above (cached after the first call)."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        for operations in document.get("paths", {}).values():
            for operation in operations.values():
                if isinstance(operation, dict):
                    schemas.update(operation.pop("x-yak-components", {}))
        app.openapi_schema = document
        return document

    app.openapi = build  # type: ignore[method-assign]
