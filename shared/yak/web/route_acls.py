"""Route ACL tables: what each route of a service needs, as data.

A service declares ONE table from ``(METHOD, path template)`` to the ``Check``s a request must
pass (``RouteTable``); each check names a resource type, where the names of the resources come
from (``Source``) and the operation, in Kafka's terms. ``PUBLIC`` (``None``) marks routes that
need nothing (health); ``AUTHENTICATED`` (no checks) routes that only need a valid credential.
WebSocket routes are keyed by the method ``WEBSOCKET``; a ``HEAD`` is checked as its ``GET``.

``missing_routes(app, table)`` lists the routes an app serves that its table does not cover: a
service refuses to start with security on while there are any, and its unit test keeps the
list empty, so a new route cannot slip through unguarded. A route missing anyway is refused to
all but admins (``UNLISTED``, deny by default). The guard that enforces a table is
``yak.web.route_guard``.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import NamedTuple

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from starlette.requests import HTTPConnection
from starlette.websockets import WebSocket

from yak.security.acl import Operation, ResourceType

__all__ = [
    "AUTHENTICATED",
    "PUBLIC",
    "UNLISTED",
    "Check",
    "RouteKey",
    "RouteTable",
    "Source",
    "app_routes",
    "missing_routes",
    "route_key",
]


class Source(Enum):
    """Where a check finds the names of the resources it checks.

    The guard resolves CLUSTER, PATH, BODY and BODY_NAME before the handler runs. FETCHED and
    LISTED name nothing there: the code that learns the names checks them (``CurrentAccess``).
    """

    #: The one cluster resource.
    CLUSTER = "cluster"
    #: A path parameter; which one per resource type is the service's choice (``path_params``).
    PATH = "path"
    #: Topic names in the JSON body: ``topics[]``, ``partitions[].topic``, ``offsets[].topic``,
    #: ``timestamps[].topic`` (the rest-proxy's consumer requests).
    BODY = "body"
    #: The JSON body's ``name`` (a topic to create).
    BODY_NAME = "body_name"
    #: The topics a read fetches, checked by the reader as it reads (rest-proxy).
    FETCHED = "fetched"
    #: A list answer keeps only the names the principal may see (``CurrentAccess.visible``).
    LISTED = "listed"


class Check(NamedTuple):
    """One authorization a request must pass."""

    resource: ResourceType
    source: Source
    operation: Operation


#: ``(METHOD, path template)``: ``("GET", "/api/v1/topics/{topic}")``.
RouteKey = tuple[str, str]
#: A service's table: the checks of each route, ``None`` for a public one.
RouteTable = Mapping[RouteKey, tuple[Check, ...] | None]

PUBLIC = None
AUTHENTICATED: tuple[Check, ...] = ()
#: The checks of a route missing from the table: admins only.
UNLISTED = (Check(ResourceType.CLUSTER, Source.CLUSTER, Operation.ALTER),)


def app_routes(app: FastAPI) -> set[RouteKey]:
    """The key of every route the app serves, but those left out of its OpenAPI document.

    ``/openapi.json``, the docs pages and ``/metrics`` (a plain route outside the guard, for
    Prometheus) are public on purpose (docs/security.md, docs/observability.md).
    """
    found: set[RouteKey] = set()
    for route in iter_route_contexts(app.routes):
        if not getattr(route.original_route, "include_in_schema", True):
            continue
        path = route.path_format or route.path
        assert path is not None
        methods = route.methods if route.methods is not None else {"WEBSOCKET"}
        found.update((method, path) for method in methods if method != "HEAD")
    return found


def missing_routes(app: FastAPI, table: RouteTable) -> list[RouteKey]:
    """The app's routes that have no entry in ``table`` (must be none)."""
    return sorted(app_routes(app) - table.keys())


def route_key(conn: HTTPConnection) -> RouteKey:
    """The key of the route a request matched (routing has run: the guard is a dependency)."""
    route = conn.scope.get("route")
    template = str(getattr(route, "path_format", None) or getattr(route, "path", ""))
    method = "WEBSOCKET" if isinstance(conn, WebSocket) else conn.scope["method"]
    return ("GET" if method == "HEAD" else method), template
