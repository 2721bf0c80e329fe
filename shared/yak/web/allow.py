"""``Allow`` for a 405: every method the request's path is served with, on every Yak service.

Starlette answers a method no route serves with the methods of the *first* route whose path
matched; a path served by several routes (``GET`` in one, ``DELETE`` in another) then
advertises only some of them, against RFC 9110 §15.5.6 and the OpenAPI document. The routes
are asked themselves (an included router matches its own routes), one method at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.routing import BaseRoute, Match
from starlette.types import Scope

__all__ = ["allowed_methods"]

_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def allowed_methods(routes: Sequence[BaseRoute], scope: Scope) -> str:
    """The ``Allow`` value for the request of ``scope``: the methods some route fully matches."""
    allowed = [
        method
        for method in _METHODS
        if any(route.matches({**scope, "method": method})[0] is Match.FULL for route in routes)
    ]
    return ", ".join(allowed)
