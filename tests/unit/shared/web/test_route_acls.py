"""Route ACL tables: the routes an app serves, those its table misses, a request's route key."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, WebSocket
from starlette.requests import HTTPConnection
from starlette.routing import Route, WebSocketRoute
from starlette.types import Message

from yak.security.acl import Operation, ResourceType
from yak.web.route_acls import (
    AUTHENTICATED,
    PUBLIC,
    Check,
    RouteTable,
    Source,
    app_routes,
    missing_routes,
    route_key,
)


def _app() -> FastAPI:
    router = APIRouter()

    @router.get("/healthz")
    async def health() -> None: ...

    @router.api_route("/topics/{topic}", methods=["GET", "HEAD", "DELETE"])
    async def topic(topic: str) -> None: ...

    @router.get("/metrics", include_in_schema=False)
    async def metrics() -> None: ...

    @router.websocket("/ws")
    async def stream(ws: WebSocket) -> None: ...

    app = FastAPI()
    app.include_router(router)
    return app


def test_the_routes_of_an_app_by_method_and_template() -> None:
    assert app_routes(_app()) == {
        ("GET", "/healthz"),
        ("GET", "/topics/{topic}"),  # its HEAD is checked as the GET
        ("DELETE", "/topics/{topic}"),
        ("WEBSOCKET", "/ws"),
    }  # not /metrics nor FastAPI's docs pages: outside the schema, public on purpose


def test_a_route_missing_from_the_table_is_reported() -> None:
    table: RouteTable = {
        ("GET", "/healthz"): PUBLIC,
        ("GET", "/topics/{topic}"): (Check(ResourceType.TOPIC, Source.PATH, Operation.DESCRIBE),),
        ("WEBSOCKET", "/ws"): AUTHENTICATED,
        ("GET", "/gone"): AUTHENTICATED,  # a rule without a route is not "missing"
    }
    assert missing_routes(_app(), table) == [("DELETE", "/topics/{topic}")]
    whole = {**table, ("DELETE", "/topics/{topic}"): AUTHENTICATED}
    assert missing_routes(_app(), whole) == []


def test_the_route_key_of_a_request() -> None:
    async def endpoint() -> None: ...

    route = Route("/topics/{topic}", endpoint, methods=["GET", "HEAD"])
    scope = {"type": "http", "method": "HEAD", "route": route, "headers": []}
    assert route_key(HTTPConnection(scope)) == ("GET", "/topics/{topic}")

    async def receive() -> Message:
        return {"type": "websocket.disconnect"}

    async def send(_message: Message) -> None: ...

    ws_scope = {"type": "websocket", "route": WebSocketRoute("/ws", endpoint), "headers": []}
    assert route_key(WebSocket(ws_scope, receive, send)) == ("WEBSOCKET", "/ws")
