"""The route guard in process: each ``Source`` resolved, denials raise the documented typed
errors and reach the audit log, lists and fetches are checked through ``CurrentAccess``.

A small FastAPI app with one route per kind of check, its table, and a ``SecurityCache`` on
the in-memory store. The principal comes from an ``x-principal`` header (the ``authenticate``
step is a parameter); one test goes through the default, the ``Authorization`` header.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any

import httpx
import pytest
from fastapi import Depends, FastAPI, Query, Request, WebSocket
from starlette.requests import HTTPConnection
from starlette.types import Message

from yak.errors import AuthenticationError, InvalidRequestError
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.security import AclBinding, SecurityStore
from yak.security.acl import CLUSTER_NAME, Operation, ResourceType
from yak.security.audit import AUDIT_LOGGER
from yak.security.cache import SecurityCache
from yak.web.errors import install_error_handlers
from yak.web.route_acls import AUTHENTICATED, PUBLIC, Check, RouteTable, Source
from yak.web.route_guard import CurrentAccess, RouteGuard

KS = Keyspace("guarded")
T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
O = Operation  # noqa: E741
TABLE: RouteTable = {
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/whoami"): AUTHENTICATED,
    ("GET", "/cluster"): (Check(C, Source.CLUSTER, O.DESCRIBE),),
    ("GET", "/topics/{topic}"): (Check(T, Source.PATH, O.DESCRIBE),),
    ("GET", "/groups/{group_id}"): (Check(G, Source.PATH, O.DESCRIBE),),
    ("POST", "/topics"): (Check(T, Source.BODY_NAME, O.CREATE),),
    ("POST", "/groups/{group_id}/commit"): (
        Check(G, Source.PATH, O.READ),
        Check(T, Source.BODY, O.READ),
    ),
    ("GET", "/records"): (Check(T, Source.FETCHED, O.READ),),
    ("GET", "/topics"): (Check(T, Source.LISTED, O.DESCRIBE),),
    ("WEBSOCKET", "/ws/{topic}"): (Check(T, Source.PATH, O.READ),),
}  # GET /unlisted is missing on purpose
ACCESS = CurrentAccess("test_route_guard_access")


async def principal_header(_cache: SecurityCache, conn: HTTPConnection) -> str:
    principal = conn.headers.get("x-principal")
    if principal is None:
        raise AuthenticationError("no x-principal")
    return principal


def guarded_app(cache: SecurityCache, *, header_auth: bool = False) -> FastAPI:
    async def security() -> SecurityCache:
        return cache

    extra: dict[str, Any] = {} if header_auth else {"authenticate": principal_header}
    guard = RouteGuard(
        TABLE,
        audited={("POST", "/topics")},
        path_params={T: "topic", G: "group_id"},
        access=ACCESS,
        security=security,
        **extra,
    )
    app = FastAPI(dependencies=[Depends(guard)])
    install_error_handlers(app)

    @app.get("/healthz")
    @app.get("/whoami")
    @app.get("/cluster")
    @app.get("/topics/{topic}")
    @app.get("/groups/{group_id}")
    @app.get("/unlisted")
    async def ok() -> dict[str, str | None]:
        access = ACCESS.get()
        return {"principal": None if access is None else access.principal}

    @app.post("/topics")
    @app.post("/groups/{group_id}/commit")
    async def echo(request: Request) -> Any:
        try:
            return json.loads(await request.body())  # the guard left the body for the handler
        except ValueError:
            raise InvalidRequestError("malformed JSON") from None

    @app.get("/records")
    async def records(topic: Annotated[list[str], Query()]) -> list[str]:
        ACCESS.require(T, topic, O.READ)
        return topic

    @app.get("/topics")
    async def topics() -> list[str]:
        return ACCESS.visible(T, ["a", "b", "c"], O.DESCRIBE)

    @app.websocket("/ws/{topic}")
    async def stream(ws: WebSocket) -> None:
        await ws.accept()
        await ws.send_text("hello")
        await ws.close()

    return app


class Env:
    def __init__(self, store: MemoryMetadataStore, cache: SecurityCache) -> None:
        self.store = store
        self.cache = cache
        self.security = SecurityStore(store, KS)
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=guarded_app(cache)), base_url="http://g"
        )

    async def allow(self, principal: str, *acls: tuple[ResourceType, str, Operation]) -> None:
        bindings = [AclBinding(principal, t, n, op) for t, n, op in acls]
        await self.cache.wait_for_revision(await self.security.add_acls(bindings))


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    store = MemoryMetadataStore()
    cache = SecurityCache(store, KS, super_users=("User:admin",))
    await cache.start()
    env = Env(store, cache)
    try:
        yield env
    finally:
        await env.http.aclose()
        await cache.stop()
        await store.aclose()


def as_(principal: str) -> dict[str, str]:
    return {"x-principal": principal}


async def test_public_routes_need_nothing_and_the_rest_a_principal(env: Env) -> None:
    assert (await env.http.get("/healthz")).json() == {"principal": None}
    refused = await env.http.get("/whoami")
    assert refused.status_code == 401
    assert refused.json()["code"] == "UNAUTHENTICATED"
    whoami = await env.http.get("/whoami", headers=as_("User:ann"))
    assert whoami.json() == {"principal": "User:ann"}


async def test_each_source_names_what_it_checks(env: Env) -> None:
    ann = as_("User:ann")
    await env.allow(
        "User:ann",
        (C, CLUSTER_NAME, O.DESCRIBE),
        (T, "orders", O.DESCRIBE),
        (G, "billing", O.DESCRIBE),
        (G, "billing", O.READ),
        (T, "orders", O.READ),
        (T, "made", O.CREATE),
    )
    http = env.http
    assert (await http.get("/cluster", headers=ann)).status_code == 200  # CLUSTER
    assert (await http.get("/topics/orders", headers=ann)).status_code == 200  # PATH: topic
    assert (await http.get("/topics/other", headers=ann)).status_code == 403
    assert (await http.get("/groups/billing", headers=ann)).status_code == 200  # PATH: group_id
    assert (await http.get("/groups/other", headers=ann)).status_code == 403
    made = await http.post("/topics", json={"name": "made"}, headers=ann)  # BODY_NAME
    assert made.json() == {"name": "made"}
    assert (await http.post("/topics", json={"name": "x"}, headers=ann)).status_code == 403
    body = {"offsets": [{"topic": "orders"}], "partitions": [{"topic": "orders"}]}  # BODY
    assert (await http.post("/groups/billing/commit", json=body, headers=ann)).json() == body
    other = {"topics": ["orders", "secret"]}
    assert (await http.post("/groups/billing/commit", json=other, headers=ann)).status_code == 403
    malformed = await http.post("/groups/billing/commit", content=b"{no", headers=ann)
    assert malformed.json()["code"] == "INVALID_REQUEST"  # names nothing: the handler refuses
    fetched = await http.get("/records", params={"topic": ["orders"]}, headers=ann)  # FETCHED
    assert fetched.json() == ["orders"]
    unfetched = await http.get("/records", params={"topic": ["secret"]}, headers=ann)
    assert unfetched.json()["code"] == "TOPIC_AUTHORIZATION_FAILED"
    await env.allow("User:ann", (T, "b", O.DESCRIBE))
    assert (await http.get("/topics", headers=ann)).json() == ["b"]  # LISTED


async def test_a_denied_check_raises_the_typed_error_and_is_audited(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    denied = await env.http.get("/topics/orders", headers=as_("User:bob"))
    assert denied.status_code == 403
    assert denied.json() == {
        "code": "TOPIC_AUTHORIZATION_FAILED",
        "message": "User:bob is not allowed DESCRIBE on TOPIC 'orders'",
        "details": {"resource_type": "TOPIC", "resource_name": "orders", "operation": "DESCRIBE"},
    }
    group = await env.http.get("/groups/g", headers=as_("User:bob"))
    assert group.json()["code"] == "GROUP_AUTHORIZATION_FAILED"
    cluster = await env.http.get("/cluster", headers=as_("User:bob"))
    assert cluster.json()["code"] == "CLUSTER_AUTHORIZATION_FAILED"
    unlisted = await env.http.get("/unlisted", headers=as_("User:bob"))
    assert unlisted.json()["code"] == "CLUSTER_AUTHORIZATION_FAILED"  # deny by default
    assert (await env.http.get("/unlisted", headers=as_("User:admin"))).status_code == 200
    await env.http.get("/cluster")
    lines = [json.loads(r.message) for r in caplog.records if r.name == AUDIT_LOGGER]
    seen = [
        (x["principal"], x["action"], x["result"], x["resource"], x["operation"]) for x in lines
    ]
    assert seen == [
        ("User:bob", "GET /topics/{topic}", "denied", "TOPIC:orders", "DESCRIBE"),
        ("User:bob", "GET /groups/{group_id}", "denied", "GROUP:g", "DESCRIBE"),
        ("User:bob", "GET /cluster", "denied", f"CLUSTER:{CLUSTER_NAME}", "DESCRIBE"),
        ("User:bob", "GET /unlisted", "denied", f"CLUSTER:{CLUSTER_NAME}", "ALTER"),
        ("User:ANONYMOUS", "GET /cluster", "unauthenticated", "", ""),
    ]
    assert all(x["request_id"] for x in lines)


async def test_cluster_create_creates_any_topic_and_audited_routes_log_what_passed(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    await env.allow("User:ops", (C, CLUSTER_NAME, O.CREATE))
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    made = await env.http.post("/topics", json={"name": "any"}, headers=as_("User:ops"))
    assert made.status_code == 200
    await env.http.get("/whoami", headers=as_("User:ops"))  # allowed, not audited
    lines = [json.loads(r.message) for r in caplog.records if r.name == AUDIT_LOGGER]
    assert [(x["action"], x["result"], x["resource"]) for x in lines] == [
        ("POST /topics", "allowed", "TOPIC:any")
    ]


async def test_the_default_principal_is_the_authorization_headers(env: Env) -> None:
    _, key, revision = await env.security.create_user("carl", with_key=True)
    assert key is not None
    await env.cache.wait_for_revision(revision)
    app = guarded_app(env.cache, header_auth=True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://g") as http:
        bearer = {"authorization": f"Bearer {key.token}"}
        assert (await http.get("/whoami", headers=bearer)).json() == {"principal": "User:carl"}
        refused = await http.get("/whoami", headers=as_("User:carl"))
        assert refused.status_code == 401
        assert "WWW-Authenticate" in refused.headers


async def test_a_websocket_is_refused_before_it_is_accepted(env: Env) -> None:
    await env.allow("User:ann", (T, "orders", O.READ))
    app = guarded_app(env.cache)

    async def connect(principal: str) -> list[Message]:
        """What the app sends to a client that connects to ``/ws/orders``."""
        inbox: list[Message] = [{"type": "websocket.connect"}]
        sent: list[Message] = []

        async def receive() -> Message:
            return inbox.pop(0) if inbox else {"type": "websocket.disconnect", "code": 1000}

        async def send(message: Message) -> None:
            sent.append(message)

        headers = [(b"x-principal", principal.encode())]
        scope = {"type": "websocket", "path": "/ws/orders", "headers": headers}
        await app({**scope, "query_string": b"", "root_path": ""}, receive, send)
        return sent

    allowed = await connect("User:ann")
    assert [m["type"] for m in allowed] == ["websocket.accept", "websocket.send", "websocket.close"]
    refused = await connect("User:eve")
    assert [(m["type"], m.get("code")) for m in refused] == [("websocket.close", 1008)]
