"""The admin API with security on, in process on the in-memory store: the route table covers
every route, credentials are required, ACLs decide, lists are filtered; the settings."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator
from typing import NamedTuple

import httpx
import pytest

from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerRegistration
from yak.security import AclBinding, Operation, ResourceType, SecurityStore
from yak.security.audit import AUDIT_LOGGER
from yak_coordinator.app import create_app
from yak_coordinator.security.guard import AdminSecurity
from yak_coordinator.security.route_acls import ROUTE_ACLS, app_routes, missing_routes
from yak_coordinator.service import Coordinator
from yak_coordinator.settings import CoordinatorSettings

KS = Keyspace("unit")
_TOPIC = {"name": "orders", "partitions": 1, "replication_factor": 1}


def test_every_route_has_an_acl_rule_and_every_rule_a_route() -> None:
    app = create_app(CoordinatorSettings(cluster_id="unit"))
    assert missing_routes(app) == []
    assert sorted(ROUTE_ACLS.keys() - app_routes(app)) == []


def test_security_settings_from_the_environment() -> None:
    settings = CoordinatorSettings.from_env(
        {"YAK_SECURITY": "on", "YAK_SUPER_USERS": "User:admin, User:ops"}
    )
    assert settings.security
    assert settings.super_users == ("User:admin", "User:ops")
    assert not CoordinatorSettings.from_env({}).security
    with pytest.raises(ValueError, match="YAK_SECURITY"):
        CoordinatorSettings.from_env({"YAK_SECURITY": "maybe"})
    with pytest.raises(ValueError, match="principal"):
        CoordinatorSettings.from_env({"YAK_SUPER_USERS": "admin"})


class Secured(NamedTuple):
    http: httpx.AsyncClient
    users: SecurityStore
    security: AdminSecurity

    async def key(self, name: str, *acls: tuple[ResourceType, str, Operation]) -> dict[str, str]:
        """A new user with ``acls`` (literal, allow); its bearer header."""
        _, made, revision = await self.users.create_user(name, with_key=True)
        assert made is not None
        bindings = [AclBinding(f"User:{name}", t, n, op) for t, n, op in acls]
        if bindings:
            revision = await self.users.add_acls(bindings)
        await self.security.wait_for_revision(revision)
        return {"authorization": f"Bearer {made.token}"}


@pytest.fixture
async def secured() -> AsyncIterator[Secured]:
    store = MemoryMetadataStore()
    settings = CoordinatorSettings(
        cluster_id="unit", node_id="c0", security=True, super_users=("User:admin",)
    )
    app = create_app(settings, store=store)
    coordinator: Coordinator = app.state.coordinator
    transport = httpx.ASGITransport(app=app)
    try:
        async with app.router.lifespan_context(app):
            await asyncio.wait_for(coordinator.wait_controller(), 5)
            broker = BrokerRegistration(broker_id=1, host="127.0.0.1", port=9501, started_at_ms=1)
            await store.put(KS.broker(1), broker.encode())
            await coordinator.cache.wait_for(lambda s: len(s.brokers) == 1, 5)
            async with httpx.AsyncClient(transport=transport, base_url="http://c") as http:
                yield Secured(http, SecurityStore(store, KS), app.state.admin_security)
    finally:
        await store.aclose()


async def test_credentials_are_required(secured: Secured) -> None:
    http = secured.http
    assert (await http.get("/readyz")).status_code == 200
    for method, path in (("GET", "/admin/v1/cluster"), ("POST", "/admin/v1/topics")):
        answer = await http.request(method, path, json=_TOPIC)
        assert answer.status_code == 401, path
        assert answer.json()["code"] == "UNAUTHENTICATED"
    wrong = {"authorization": "Bearer yak_0123456789abcdef_nope"}
    assert (await http.get("/admin/v1/topics", headers=wrong)).status_code == 401
    admin = await secured.key("admin")
    assert (await http.get("/admin/v1/cluster", headers=admin)).status_code == 200
    await secured.security.wait_for_revision(await secured.users.set_password("admin", "pw"))
    basic = {"authorization": "Basic " + base64.b64encode(b"admin:pw").decode()}
    assert (await http.get("/admin/v1/cluster", headers=basic)).status_code == 200


async def test_acls_decide_and_lists_are_filtered(secured: Secured) -> None:
    http = secured.http
    admin = await secured.key("admin")
    creator = await secured.key("carl", (ResourceType.TOPIC, "orders", Operation.CREATE))
    nobody = await secured.key("nina")
    denied = await http.post("/admin/v1/topics", json=_TOPIC, headers=nobody)
    assert denied.status_code == 403
    assert denied.json()["code"] == "TOPIC_AUTHORIZATION_FAILED"
    made = await http.post("/admin/v1/topics", json=_TOPIC, headers=creator)
    assert made.status_code == 201, made.text
    other = await http.post("/admin/v1/topics", json={**_TOPIC, "name": "x"}, headers=creator)
    assert other.status_code == 403
    assert (await http.get("/admin/v1/topics", headers=admin)).json()["topics"][0]["name"] == (
        "orders"
    )
    assert (await http.get("/admin/v1/topics", headers=nobody)).json() == {"topics": []}
    assert (await http.get("/admin/v1/topics/orders", headers=nobody)).status_code == 403
    assert (await http.get("/admin/v1/topics/orders", headers=creator)).status_code == 403
    assert (await http.get("/admin/v1/groups", headers=nobody)).json() == {"groups": []}
    move = {"replicas": [1]}
    path = "/admin/v1/topics/orders/partitions/0/reassignment"
    refused = await http.put(path, json=move, headers=nobody)
    assert refused.json()["code"] == "CLUSTER_AUTHORIZATION_FAILED"
    ops = await secured.key("olaf", (ResourceType.CLUSTER, "yak-cluster", Operation.CREATE))
    any_name = await http.post("/admin/v1/topics", json={**_TOPIC, "name": "y"}, headers=ops)
    assert any_name.status_code == 201, any_name.text  # CLUSTER CREATE: any topic
    deleted = await http.delete("/admin/v1/topics/y", headers=creator)
    assert deleted.status_code == 403
    assert (await http.delete("/admin/v1/topics/y", headers=admin)).status_code == 200


async def test_refusals_are_audited_and_401_carries_a_challenge(
    secured: Secured, caplog: pytest.LogCaptureFixture
) -> None:
    http = secured.http
    creator = await secured.key("cleo", (ResourceType.TOPIC, "audited", Operation.CREATE))
    nobody = await secured.key("ned")
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    anonymous = await http.get("/admin/v1/cluster", headers={"x-request-id": "r-1"})
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith('Bearer realm="yak"')
    assert 'Basic realm="yak"' in anonymous.headers["www-authenticate"]
    assert (await http.delete("/admin/v1/topics/audited", headers=nobody)).status_code == 403
    made = await http.post("/admin/v1/topics", json={**_TOPIC, "name": "audited"}, headers=creator)
    assert made.status_code == 201, made.text
    assert (await http.get("/admin/v1/topics/audited", headers=creator)).status_code == 403
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == AUDIT_LOGGER]
    picked = [(x["principal"], x["action"], x["result"], x["resource"]) for x in lines]
    assert picked == [
        ("User:ANONYMOUS", "GET /admin/v1/cluster", "unauthenticated", ""),
        ("User:ned", "DELETE /admin/v1/topics/{name}", "denied", "TOPIC:audited"),
        ("User:cleo", "POST /admin/v1/topics", "allowed", "TOPIC:audited"),
        ("User:cleo", "GET /admin/v1/topics/{name}", "denied", "TOPIC:audited"),
    ]
    assert lines[0]["request_id"] == "r-1"
    assert lines[1]["operation"] == "DELETE"
