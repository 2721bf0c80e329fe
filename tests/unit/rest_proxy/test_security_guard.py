"""The proxy's guard in process, on the in-memory store: the route table covers every route,
credentials are required, ACLs decide, lists are filtered, and denials reach the audit log.
The security writes go to an in-process coordinator (security on too) with the caller's
credential, as in a cluster: the proxy writes no ``security/`` key itself."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import NamedTuple

import httpx
import pytest
from starlette.requests import HTTPConnection
from starlette.routing import Route

from yak.clients.admin import AdminClient
from yak.errors import AuthenticationError
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.security import SecurityStore
from yak.security.cache import SecurityCache
from yak.web.tls import PEER_CN_STATE_KEY
from yak_coordinator.app import create_app as create_coordinator
from yak_coordinator.settings import CoordinatorSettings
from yak_rest_proxy.app import create_app
from yak_rest_proxy.runtime import ProxyRuntime
from yak_rest_proxy.security.access import current_access
from yak_rest_proxy.security.forwarded_credential import ForwardedAuth
from yak_rest_proxy.security.guard import Guard
from yak_rest_proxy.security.route_acls import ROUTE_ACLS, app_routes, missing_routes
from yak_rest_proxy.settings import ProxySettings

CLUSTER = "guard"


def test_every_route_has_an_acl_rule_and_every_rule_a_route() -> None:
    app = create_app(ProxySettings())
    assert missing_routes(app) == []
    assert sorted(ROUTE_ACLS.keys() - app_routes(app)) == []


def test_security_settings_from_the_environment() -> None:
    settings = ProxySettings.from_env(
        {"YAK_SECURITY": "on", "YAK_SUPER_USERS": "User:admin, User:ops"}
    )
    assert settings.security
    assert settings.super_users == ("User:admin", "User:ops")
    assert not ProxySettings.from_env({}).security
    with pytest.raises(ValueError, match="YAK_SECURITY"):
        ProxySettings.from_env({"YAK_SECURITY": "maybe"})
    with pytest.raises(ValueError, match="invalid principal"):
        ProxySettings.from_env({"YAK_SUPER_USERS": "admin"})


class Proxy(NamedTuple):
    client: httpx.AsyncClient
    store: SecurityStore
    runtime: ProxyRuntime

    async def admin(self, password: str | None = None) -> str:
        """Create the super-user ``admin`` straight in etcd (the bootstrap); its API key."""
        _, key, revision = await self.store.create_user("admin", password=password, with_key=True)
        assert key is not None
        await self.runtime.wait_for_security(revision)
        return key.token


@pytest.fixture
async def proxy(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Proxy]:
    etcd = MemoryMetadataStore()
    settings = ProxySettings(cluster_id=CLUSTER, security=True, super_users=("User:admin",))
    app = create_app(settings, store=etcd)
    coordinator = create_coordinator(
        CoordinatorSettings(
            cluster_id=CLUSTER, node_id="c0", security=True, super_users=("User:admin",)
        ),
        store=etcd,
    )
    to_coordinator = httpx.ASGITransport(app=coordinator)
    admin = AdminClient("http://c0", transport=to_coordinator, auth=ForwardedAuth())
    runtime: ProxyRuntime = app.state.runtime
    monkeypatch.setattr(runtime, "coordinator", lambda: admin)
    async with coordinator.router.lifespan_context(coordinator), app.router.lifespan_context(app):
        await asyncio.wait_for(coordinator.state.coordinator.wait_controller(), 5)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
            yield Proxy(client, SecurityStore(etcd, Keyspace(CLUSTER)), runtime)
    await admin.aclose()
    await etcd.aclose()


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def test_credentials_are_required(
    proxy: Proxy,
) -> None:
    client = proxy.client
    assert (await client.get("/healthz")).status_code == 200
    assert (await client.get("/openapi.json")).status_code == 200
    answer = await client.get("/topics")
    assert answer.status_code == 401
    assert answer.json()["error_code"] == 40101
    assert "Bearer" in answer.headers["www-authenticate"]
    native = await client.get("/api/v1/security/users")
    assert native.status_code == 401
    assert native.json()["code"] == "UNAUTHENTICATED"
    for header in ("Bearer nope", "Basic !!!", "Basic " + base64.b64encode(b"x:y").decode()):
        assert (await client.get("/topics", headers={"authorization": header})).status_code == 401
    token = await proxy.admin(password="pw")
    assert (await client.get("/api/v1/security/users", headers=bearer(token))).is_success
    basic = base64.b64encode(b"admin:pw").decode()
    answer = await client.get("/api/v1/security/users", headers={"authorization": f"Basic {basic}"})
    assert answer.status_code == 200, answer.text


async def test_acls_decide_and_lists_are_filtered(
    proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    client, admin = proxy.client, await proxy.admin()
    made = await client.post(
        "/api/v1/security/users", json={"name": "alice"}, headers=bearer(admin)
    )
    assert made.status_code == 201, made.text
    alice = bearer(made.json()["api_key"]["api_key"])
    assert (await client.get("/topics", headers=alice)).json() == []
    denied = await client.get("/api/v1/groups/g1", headers=alice)
    assert denied.status_code == 403
    assert denied.json()["code"] == "GROUP_AUTHORIZATION_FAILED"
    caplog.set_level("INFO", logger="yak.audit")
    denied = await client.get("/brokers", headers=alice)
    assert (denied.status_code, denied.json()["error_code"]) == (403, 40301)
    line = json.loads(caplog.records[-1].getMessage())
    assert line["principal"] == "User:alice"
    assert line["result"] == "denied"
    assert line["resource"] == "CLUSTER:yak-cluster"
    acl = {
        "principal": "User:alice",
        "resource_type": "CLUSTER",
        "resource_name": "yak-cluster",
        "operation": "DESCRIBE",
    }
    added = await client.post("/api/v1/security/acls", json={"acls": [acl]}, headers=bearer(admin))
    assert added.status_code == 201, added.text
    assert (await client.get("/brokers", headers=alice)).status_code == 200
    # Creating a topic is a TOPIC CREATE on the body's name: denied before reaching anything.
    create = await client.post("/api/v1/topics", json={"name": "t1"}, headers=alice)
    assert create.json()["code"] == "TOPIC_AUTHORIZATION_FAILED"
    listed = await client.get("/api/v1/security/acls", headers=bearer(admin))
    assert listed.json()["acls"] == [{**acl, "pattern_type": "LITERAL", "permission": "ALLOW"}]
    removed = await client.delete(
        "/api/v1/security/acls", params={"principal": "User:alice"}, headers=bearer(admin)
    )
    assert len(removed.json()["acls"]) == 1
    assert (await client.get("/brokers", headers=alice)).status_code == 403


async def test_key_rotation(proxy: Proxy) -> None:
    client, admin = proxy.client, await proxy.admin()
    made = await client.post(
        "/api/v1/security/users/admin/keys",
        json={"description": "rotation"},
        headers=bearer(admin),
    )
    assert made.status_code == 201, made.text
    new = made.json()
    revoked = await client.delete(
        f"/api/v1/security/users/admin/keys/{admin.split('_')[1]}", headers=bearer(new["api_key"])
    )
    assert revoked.status_code == 204
    assert (await client.get("/brokers", headers=bearer(admin))).status_code == 401
    assert (await client.get("/brokers", headers=bearer(new["api_key"]))).status_code == 200
    users = (await client.get("/api/v1/security/users", headers=bearer(new["api_key"]))).json()
    assert [k["key_id"] for k in users["users"][0]["keys"]] == [new["key_id"]]
    assert "hash" not in json.dumps(users)


async def test_whoami_names_the_caller(proxy: Proxy) -> None:
    client, admin = proxy.client, await proxy.admin()
    assert (await client.get("/api/v1/security/whoami")).status_code == 401
    me = (await client.get("/api/v1/security/whoami", headers=bearer(admin))).json()
    assert me == {"principal": "User:admin", "super_user": True, "security": True}
    made = await client.post("/api/v1/security/users", json={"name": "bob"}, headers=bearer(admin))
    bob = bearer(made.json()["api_key"]["api_key"])
    me = (await client.get("/api/v1/security/whoami", headers=bob)).json()
    assert me == {"principal": "User:bob", "super_user": False, "security": True}


async def test_whoami_with_security_off() -> None:
    app = create_app(ProxySettings(cluster_id=CLUSTER), store=MemoryMetadataStore())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
            me = (await client.get("/api/v1/security/whoami")).json()
    assert me == {"principal": "User:ANONYMOUS", "super_user": False, "security": False}


async def test_a_client_certificate_names_the_principal_without_a_header() -> None:
    """The proxy's own step: no ``Authorization`` header, a verified certificate's CN."""
    guard = Guard(SecurityCache(MemoryMetadataStore(), Keyspace(CLUSTER), super_users=()))

    async def whoami() -> None: ...

    route = Route("/api/v1/security/whoami", whoami)  # AUTHENTICATED

    def request(cn: str | None, authorization: str = "") -> HTTPConnection:
        headers = [(b"authorization", authorization.encode())] if authorization else []
        state = {} if cn is None else {PEER_CN_STATE_KEY: cn}
        return HTTPConnection(
            {"type": "http", "method": "GET", "route": route, "headers": headers, "state": state}
        )

    await guard(request("alice"))
    access = current_access.get()
    assert access is not None
    assert access.principal == "User:alice"
    with pytest.raises(AuthenticationError, match="not a valid user name"):
        await guard(request("not a user"))
    with pytest.raises(AuthenticationError, match="needs credentials"):
        await guard(request(None))
    with pytest.raises(AuthenticationError):  # a header wins over the certificate
        await guard(request("alice", "Bearer yak_0123456789abcdef_nope"))
