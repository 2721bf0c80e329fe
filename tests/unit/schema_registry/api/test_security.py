"""The registry with security on, in process on the in-memory store: every route in the ACL
table, credentials required (Basic as Confluent's clients send it, or an API key), ACLs on
subjects as topics, Confluent's error bodies; the settings."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import NamedTuple

import httpx
import pytest

from tests.unit.schema_registry.conftest import avro_record
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.security import AclBinding, Operation, ResourceType, SecurityStore
from yak.security.acl import PatternType
from yak.web.route_acls import app_routes, missing_routes
from yak_schema_registry.api.security import ROUTE_ACLS, RegistrySecurity
from yak_schema_registry.app import create_app
from yak_schema_registry.settings import RegistrySettings

SCHEMA = {"schema": avro_record({"name": "a", "type": "int"})}


def test_every_route_has_an_acl_rule_and_every_rule_a_route() -> None:
    app = create_app(RegistrySettings(cluster_id="unit"), store=MemoryMetadataStore())
    assert missing_routes(app, ROUTE_ACLS) == []
    assert sorted(ROUTE_ACLS.keys() - app_routes(app)) == []


def test_security_settings_from_the_environment() -> None:
    env = {"YAK_SECURITY": "on", "YAK_SUPER_USERS": "User:admin, User:ops"}
    settings = RegistrySettings.from_env(env)
    assert settings.security
    assert settings.super_users == ("User:admin", "User:ops")
    assert not RegistrySettings.from_env({}).security
    with pytest.raises(ValueError, match="YAK_SECURITY"):
        RegistrySettings.from_env({"YAK_SECURITY": "maybe"})


class Secured(NamedTuple):
    http: httpx.AsyncClient
    users: SecurityStore
    security: RegistrySecurity

    async def user(self, name: str, *acls: AclBinding) -> dict[str, str]:
        """A new user with a password and ``acls``; its Basic header."""
        _, _, revision = await self.users.create_user(name, password=f"{name}-secret")
        if acls:
            revision = await self.users.add_acls(list(acls))
        await self.security.wait_for_revision(revision)
        basic = base64.b64encode(f"{name}:{name}-secret".encode()).decode()
        return {"authorization": f"Basic {basic}"}


@pytest.fixture
async def secured() -> AsyncIterator[Secured]:
    store = MemoryMetadataStore()
    settings = RegistrySettings(cluster_id="unit", security=True, super_users=("User:admin",))
    app = create_app(settings, store=store)
    security = app.state.security
    assert isinstance(security, RegistrySecurity)
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://registry") as http:
                yield Secured(http, SecurityStore(store, Keyspace("unit")), security)
    finally:
        await store.aclose()


async def test_no_credential_is_401_with_confluents_body(secured: Secured) -> None:
    answer = await secured.http.get("/subjects")
    assert answer.status_code == 401
    assert answer.json()["error_code"] == 40101
    assert answer.headers["www-authenticate"].startswith("Basic")
    wrong = {"authorization": "Basic " + base64.b64encode(b"nobody:x").decode()}
    assert (await secured.http.get("/subjects", headers=wrong)).status_code == 401
    assert (await secured.http.get("/healthz")).status_code == 200  # public


async def test_reads_need_a_credential_only(secured: Secured) -> None:
    reader = await secured.user("reader")
    assert (await secured.http.get("/subjects", headers=reader)).json() == []
    check = await secured.http.post(
        "/compatibility/subjects/orders-value/versions", json=SCHEMA, headers=reader
    )
    assert check.json() == {"is_compatible": True}  # no version yet: past the guard


async def test_registering_needs_write_on_the_subject_as_a_topic(secured: Secured) -> None:
    reader = await secured.user("reader")
    denied = await secured.http.post("/subjects/orders-value/versions", json=SCHEMA, headers=reader)
    assert denied.status_code == 403
    assert denied.json()["error_code"] == 40301
    assert (await secured.http.get("/subjects", headers=reader)).json() == []  # nothing written
    prefixed = AclBinding(
        "User:writer",
        ResourceType.TOPIC,
        "orders",
        Operation.WRITE,
        pattern_type=PatternType.PREFIXED,
    )
    writer = await secured.user("writer", prefixed)
    made = await secured.http.post("/subjects/orders-value/versions", json=SCHEMA, headers=writer)
    assert made.json() == {"id": 1}
    other = await secured.http.post("/subjects/users-value/versions", json=SCHEMA, headers=writer)
    assert other.status_code == 403
    deleted = await secured.http.delete("/subjects/orders-value", headers=writer)
    assert deleted.status_code == 403  # WRITE is not DELETE


async def test_levels_and_modes_need_alter_configs(secured: Secured) -> None:
    subject_level = AclBinding(
        "User:ops", ResourceType.TOPIC, "orders-value", Operation.ALTER_CONFIGS
    )
    ops = await secured.user("ops", subject_level)
    body = {"compatibility": "FULL"}
    assert (
        await secured.http.put("/config/orders-value", json=body, headers=ops)
    ).status_code == 200
    assert (await secured.http.put("/config", json=body, headers=ops)).status_code == 403
    mode = {"mode": "READONLY"}
    assert (await secured.http.put("/mode/orders-value", json=mode, headers=ops)).status_code == 403
    admin = await secured.user("admin")  # a super-user
    assert (await secured.http.put("/config", json=body, headers=admin)).json() == body


async def test_an_api_key_works_as_a_bearer_token(secured: Secured) -> None:
    _, made, revision = await secured.users.create_user("keyed", with_key=True)
    assert made is not None
    await secured.security.wait_for_revision(revision)
    bearer = {"authorization": f"Bearer {made.token}"}
    assert (await secured.http.get("/schemas/types", headers=bearer)).json() == [
        "AVRO",
        "JSON",
        "PROTOBUF",
    ]


def test_the_table_reads_as_documented() -> None:
    writes = {key for key, checks in ROUTE_ACLS.items() if checks}
    assert ("POST", "/subjects/{subject}/versions") in writes
    assert ("POST", "/subjects/{subject}") not in writes  # a lookup is a read
    assert json.dumps(sorted(ROUTE_ACLS)).count("/mode") == 5
