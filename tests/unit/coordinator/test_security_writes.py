"""The coordinator's security write routes (``/admin/v1/security``), which the proxies send
their security admin API's changes to: through the typed ``AdminClient`` in process on the
in-memory store, security on. Each write lands in etcd as ``SecurityStore`` / ``QuotaStore``
would make it and answers its revision; errors keep their codes; CLUSTER ALTER decides."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator
from typing import NamedTuple

import httpx
import pytest

from yak.clients.admin import AdminClient
from yak.errors import (
    ClusterAuthorizationError,
    DuplicateResourceError,
    InvalidRequestError,
    ResourceNotFoundError,
)
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.security import AclBinding, Operation, ResourceType, SecurityStore
from yak.security.acl import AclFilter
from yak.security.quota_store import QuotaConfig, QuotaStore
from yak_coordinator.app import create_app
from yak_coordinator.service import Coordinator
from yak_coordinator.settings import CoordinatorSettings

KS = Keyspace("unit")


class _Bearer(httpx.Auth):
    def __init__(self, token: str) -> None:
        self.token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["authorization"] = f"Bearer {self.token}"
        yield request


class Writes(NamedTuple):
    transport: httpx.AsyncBaseTransport
    users: SecurityStore
    quotas: QuotaStore

    def client(self, token: str) -> AdminClient:
        return AdminClient("http://c", transport=self.transport, auth=_Bearer(token))

    async def token(self, name: str) -> str:
        _, made, _ = await self.users.create_user(name, with_key=True)
        assert made is not None
        return made.token


@pytest.fixture
async def writes() -> AsyncIterator[Writes]:
    store = MemoryMetadataStore()
    settings = CoordinatorSettings(
        cluster_id="unit", node_id="c0", security=True, super_users=("User:admin",)
    )
    app = create_app(settings, store=store)
    coordinator: Coordinator = app.state.coordinator
    try:
        async with app.router.lifespan_context(app):
            await asyncio.wait_for(coordinator.wait_controller(), 5)
            transport = httpx.ASGITransport(app=app)
            yield Writes(transport, SecurityStore(store, KS), QuotaStore(store, KS))
    finally:
        await store.aclose()


async def test_user_writes_land_in_etcd_with_their_revision(writes: Writes) -> None:
    async with writes.client(await writes.token("admin")) as admin:
        made = await admin.create_user("alice", password="pw", api_key=True)
        assert made.revision > 0
        assert made.user.name == "alice"
        assert made.user.has_password
        assert made.api_key is not None
        assert made.api_key.api_key.startswith("yak_")
        record = await writes.users.get_user("alice")
        assert list(record.keys) == [made.api_key.key_id]
        with pytest.raises(DuplicateResourceError):
            await admin.create_user("alice")
        key = await admin.add_key("alice", "ci")
        assert key.revision > made.revision
        assert key.api_key.user == "alice"
        assert set((await writes.users.get_user("alice")).keys) == {
            made.api_key.key_id,
            key.api_key.key_id,
        }
        revoked = await admin.revoke_key("alice", made.api_key.key_id)
        assert revoked.revision > key.revision
        assert set((await writes.users.get_user("alice")).keys) == {key.api_key.key_id}
        with pytest.raises(ResourceNotFoundError):
            await admin.revoke_key("alice", made.api_key.key_id)
        await admin.set_password("alice", None)
        assert (await writes.users.get_user("alice")).password is None
        with pytest.raises(InvalidRequestError):
            await admin.delete_user("..")
        assert (await admin.delete_user("alice")).revision > 0
        with pytest.raises(ResourceNotFoundError):
            await admin.delete_user("alice")


async def test_acl_and_quota_writes(writes: Writes) -> None:
    async with writes.client(await writes.token("admin")) as admin:
        acls = [
            AclBinding("User:bob", ResourceType.TOPIC, "orders", Operation.READ),
            AclBinding("User:carl", ResourceType.GROUP, "g", Operation.READ),
        ]
        added = await admin.add_acls(acls)
        assert added.revision > 0
        assert len(added.acls) == 2
        assert {a.principal for a in await writes.users.list_acls()} == {"User:bob", "User:carl"}
        removed = await admin.remove_acls(AclFilter(principal="User:bob"))
        assert [a.principal for a in removed.acls] == ["User:bob"]
        assert [a.principal for a in await writes.users.list_acls()] == ["User:carl"]
        everything = await admin.remove_acls(AclFilter())
        assert len(everything.acls) == 1
        assert await writes.users.list_acls() == []

        quota = await admin.set_quota("User:bob", 1000, None)
        assert quota.revision > 0
        assert await writes.quotas.get("User:bob") == QuotaConfig(1000, None)
        with pytest.raises(InvalidRequestError):
            await admin.set_quota("bob", 1, 1)
        assert (await admin.delete_quota("User:bob")).revision > quota.revision
        with pytest.raises(ResourceNotFoundError):
            await admin.delete_quota("User:bob")


async def test_the_writes_need_cluster_alter(writes: Writes) -> None:
    nobody = await writes.token("nina")
    async with writes.client(nobody) as client:
        with pytest.raises(ClusterAuthorizationError):
            await client.create_user("mallory")
        with pytest.raises(ClusterAuthorizationError):
            await client.add_acls(
                [AclBinding("User:nina", ResourceType.CLUSTER, "yak-cluster", Operation.ALL)]
            )
        with pytest.raises(ClusterAuthorizationError):
            await client.set_quota("User:nina", 0, 0)
    async with httpx.AsyncClient(transport=writes.transport, base_url="http://c") as http:
        wrong = {"authorization": "Bearer yak_0123456789abcdef_nope"}
        answer = await http.post("/admin/v1/security/users", json={"name": "eve"}, headers=wrong)
        assert answer.status_code == 401
    with pytest.raises(ResourceNotFoundError):
        await writes.users.get_user("mallory")
