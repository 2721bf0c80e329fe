"""A cluster service acting for a principal on the admin API (``Yak-On-Behalf-Of``), in
process on the in-memory store with security on: accepted only with the cluster secret and
without a user credential; then the principal's ACLs decide and the audit names it."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NamedTuple

import httpx
import pytest

from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerRegistration
from yak.security import AclBinding, Operation, PatternType, ResourceType, SecurityStore
from yak.security.audit import AUDIT_LOGGER
from yak.security.cluster_secret import CLUSTER_SECRET_HEADER, ON_BEHALF_OF_HEADER
from yak_coordinator.app import create_app
from yak_coordinator.security.guard import AdminSecurity
from yak_coordinator.settings import CoordinatorSettings

KS = Keyspace("unit")
SECRET = "s3cret-of-the-cluster-0123456789"
SERVICE = {CLUSTER_SECRET_HEADER: SECRET}
PREFIXED = PatternType.PREFIXED


def topic(name: str) -> dict[str, object]:
    return {"name": name, "partitions": 1, "replication_factor": 1}


def as_(principal: str) -> dict[str, str]:
    return {**SERVICE, ON_BEHALF_OF_HEADER: principal}


class Coordinator(NamedTuple):
    http: httpx.AsyncClient
    users: SecurityStore
    security: AdminSecurity

    async def grant(self, *acls: AclBinding) -> None:
        await self.security.wait_for_revision(await self.users.add_acls(list(acls)))


@asynccontextmanager
async def coordinator(secret: str | None) -> AsyncIterator[Coordinator]:
    store = MemoryMetadataStore()
    settings = CoordinatorSettings(
        cluster_id="unit",
        node_id="c0",
        security=True,
        cluster_secret=secret,
        super_users=("User:admin",),
    )
    app = create_app(settings, store=store)
    transport = httpx.ASGITransport(app=app)
    try:
        async with app.router.lifespan_context(app):
            await asyncio.wait_for(app.state.coordinator.wait_controller(), 5)
            broker = BrokerRegistration(broker_id=1, host="127.0.0.1", port=9501, started_at_ms=1)
            await store.put(KS.broker(1), broker.encode())
            await app.state.coordinator.cache.wait_for(lambda s: len(s.brokers) == 1, 5)
            async with httpx.AsyncClient(transport=transport, base_url="http://c") as http:
                yield Coordinator(http, SecurityStore(store, KS), app.state.admin_security)
    finally:
        await store.aclose()


@pytest.fixture
async def secured() -> AsyncIterator[Coordinator]:
    async with coordinator(SECRET) as running:
        yield running


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, str]]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == AUDIT_LOGGER]


async def test_the_service_credential_acts_as_the_principal_under_its_acls(
    secured: Coordinator, caplog: pytest.LogCaptureFixture
) -> None:
    await secured.grant(
        *(
            AclBinding("User:alice", ResourceType.TOPIC, "team-", op, pattern_type=PREFIXED)
            for op in (Operation.CREATE, Operation.DELETE)
        )
    )
    http = secured.http
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        made = await http.post("/admin/v1/topics", json=topic("team-a"), headers=as_("User:alice"))
        assert made.status_code == 201, made.text
        refused = await http.post("/admin/v1/topics", json=topic("team-b"), headers=as_("User:bob"))
        assert refused.status_code == 403
        assert refused.json()["code"] == "TOPIC_AUTHORIZATION_FAILED"
        other = await http.post("/admin/v1/topics", json=topic("x"), headers=as_("User:alice"))
        assert other.status_code == 403
        gone = await http.delete("/admin/v1/topics/team-a", headers=as_("User:alice"))
        assert gone.status_code == 200, gone.text
    listed = await http.get("/admin/v1/topics", headers=as_("User:admin"))
    assert {t["name"] for t in listed.json()["topics"]} <= {"team-a"}  # refusals made nothing
    lines = [(a["principal"], a["result"], a["resource"]) for a in audit_lines(caplog)]
    assert ("User:alice", "allowed", "TOPIC:team-a") in lines
    assert ("User:bob", "denied", "TOPIC:team-b") in lines
    assert ("User:alice", "denied", "TOPIC:x") in lines


async def test_a_user_credential_cannot_act_for_another_principal(secured: Coordinator) -> None:
    _, key, revision = await secured.users.create_user("mallory", with_key=True)
    assert key is not None
    await secured.security.wait_for_revision(revision)
    mallory = {**SERVICE, "authorization": f"Bearer {key.token}"}
    own = await secured.http.get("/admin/v1/topics", headers=mallory)
    assert own.status_code == 200  # her own credential works
    impersonating = {**mallory, ON_BEHALF_OF_HEADER: "User:admin"}
    answer = await secured.http.get("/admin/v1/topics", headers=impersonating)
    assert answer.status_code == 401
    assert answer.json()["code"] == "UNAUTHENTICATED"
    assert ON_BEHALF_OF_HEADER in answer.json()["message"]


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        (SERVICE, "credentials"),  # the secret alone is no principal
        (as_("alice"), "invalid principal"),
        (as_("User:*"), "invalid principal"),
    ],
)
async def test_the_service_credential_needs_a_well_formed_principal(
    secured: Coordinator, headers: dict[str, str], why: str
) -> None:
    answer = await secured.http.get("/admin/v1/topics", headers=headers)
    assert answer.status_code == 401
    assert why in answer.json()["message"]


async def test_without_a_cluster_secret_no_caller_is_a_service() -> None:
    async with coordinator(None) as running:
        answer = await running.http.get(
            "/admin/v1/topics", headers={ON_BEHALF_OF_HEADER: "User:alice"}
        )
        assert answer.status_code == 401
        assert "cluster secret" in answer.json()["message"]
