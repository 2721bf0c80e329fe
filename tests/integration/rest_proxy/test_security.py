"""Security on (``YAK_SECURITY=on``) against a real cluster: two secured proxies, one broker.

* Every route of the OpenAPI document answers 401 without a credential and with a wrong one
  (a table over the document, so a new route cannot slip through).
* An ACL matrix over real endpoints, in both dialects, with the codes each answers.
* Key rotation: a new key works, a revoked one is refused on the next request, on the other
  proxy too. The first user comes from ``yak users create --bootstrap`` (straight to etcd);
  the SDK and the CLI are used with an API key.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from loadtest.local_cluster import LocalCluster, local_cluster
from tests.integration.rest_proxy.conftest import V2, unique
from yak.cli.main import app as yak_cli
from yak.errors import AuthenticationError, TopicAuthorizationError
from yak.etcd_server import EmbeddedEtcd
from yak.sdk import AsyncAdmin, AsyncProducer

pytestmark = pytest.mark.integration

_HTTP_METHODS = {"get", "put", "post", "delete", "patch"}
_PUBLIC = {"/healthz", "/readyz"}


class Secured:
    """The cluster, the admin's key and helpers."""

    def __init__(self, cluster: LocalCluster, admin_key: str) -> None:
        self.cluster = cluster
        self.admin_key = admin_key

    def client(self, key: str | None, proxy: int = 0) -> httpx.AsyncClient:
        headers = {"authorization": f"Bearer {key}"} if key else {}
        return httpx.AsyncClient(
            base_url=self.cluster.proxy_url(proxy), headers=headers, timeout=30
        )


def _cli(*args: str) -> str:
    result = CliRunner().invoke(yak_cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd) -> Iterator[Secured]:
    folder: Path = tmp_path_factory.mktemp("secure")
    cluster_id = f"sec-{uuid.uuid4().hex[:8]}"
    output = _cli(
        *("users", "create", "admin", "--bootstrap"),
        *("--etcd", etcd.endpoint, "--cluster-id", cluster_id),
    )
    admin_key = output.strip().splitlines()[-1]
    with local_cluster(folder, etcd, cluster_id, brokers=1) as running:
        for index in (0, 1):
            running.start_proxy(index, YAK_SECURITY="on", YAK_SUPER_USERS="User:admin")
        yield Secured(running, admin_key)


async def _topic(secured: Secured, name: str) -> None:
    async with secured.client(secured.admin_key) as admin:
        made = await admin.post(
            "/api/v1/topics", json={"name": name, "partitions": 1, "replication_factor": 1}
        )
        assert made.status_code == 201, made.text
    for proxy in (0, 1):
        async with secured.client(secured.admin_key, proxy) as http:
            deadline = time.monotonic() + 20
            while (await http.get(f"/topics/{name}")).status_code != 200:
                assert time.monotonic() < deadline, name
                await asyncio.sleep(0.05)  # another process's metadata


async def _user(secured: Secured, name: str, acls: list[dict[str, Any]]) -> str:
    async with secured.client(secured.admin_key) as admin:
        made = await admin.post("/api/v1/security/users", json={"name": name})
        assert made.status_code == 201, made.text
        if acls:
            added = await admin.post("/api/v1/security/acls", json={"acls": acls})
            assert added.status_code == 201, added.text
    key: str = made.json()["api_key"]["api_key"]
    return key


def _acl(principal: str, rtype: str, name: str, op: str, **extra: str) -> dict[str, Any]:
    return {
        "principal": principal,
        "resource_type": rtype,
        "resource_name": name,
        "operation": op,
        **extra,
    }


async def test_every_documented_route_needs_a_credential(secured: Secured) -> None:
    async with secured.client(None) as anonymous:
        document = (await anonymous.get("/openapi.json")).json()
        operations = [
            (method.upper(), path)
            for path, item in document["paths"].items()
            for method in item
            if method in _HTTP_METHODS and path not in _PUBLIC
        ]
        assert len(operations) > 40
        wrong = "yak_0123456789abcdef_" + "x" * 43
        failures = []
        for method, path in operations:
            url = path.replace("{partition}", "0").replace("{", "").replace("}", "")
            for headers in ({}, {"authorization": f"Bearer {wrong}"}):
                answer = await anonymous.request(method, url, headers=headers, json={})
                if answer.status_code != 401 or "www-authenticate" not in answer.headers:
                    failures.append(f"{method} {path} {headers}: {answer.status_code}")
        assert failures == []
        for path in _PUBLIC:
            assert (await anonymous.get(path)).status_code == 200


async def test_acl_matrix(secured: Secured) -> None:
    topic, other, group = unique("sec-t"), unique("sec-o"), unique("sec-g")
    await _topic(secured, topic)
    await _topic(secured, other)
    principal = f"User:{(name := unique('alice'))}"
    alice = await _user(
        secured,
        name,
        [
            _acl(principal, "TOPIC", topic, "WRITE"),
            _acl(principal, "TOPIC", topic, "READ"),
            _acl(principal, "GROUP", group, "READ"),
        ],
    )
    bob = await _user(secured, unique("bob"), [])
    record = {"records": [{"value": {"n": 1}}]}
    async with secured.client(alice) as a, secured.client(bob) as b:
        # produce: TOPIC WRITE, both dialects
        assert (await a.post(f"/api/v1/topics/{topic}/records", json=record)).status_code == 200
        denied = await b.post(f"/api/v1/topics/{topic}/records", json=record)
        assert (denied.status_code, denied.json()["code"]) == (403, "TOPIC_AUTHORIZATION_FAILED")
        v2 = {"content-type": "application/vnd.kafka.json.v2+json"}
        assert (await a.post(f"/topics/{topic}", json=record, headers=v2)).status_code == 200
        denied = await b.post(f"/topics/{topic}", json=record, headers=v2)
        assert (denied.status_code, denied.json()["error_code"]) == (403, 40301)
        assert (await a.post(f"/topics/{other}", json=record, headers=v2)).status_code == 403
        # read: TOPIC READ
        read = f"/api/v1/topics/{topic}/partitions/0/records"
        assert (await a.get(read, params={"offset": 0})).status_code == 200
        assert (await b.get(read, params={"offset": 0})).status_code == 403
        # list topics: filtered to what the principal may DESCRIBE (READ/WRITE imply it)
        assert await _names(a, "/api/v1/topics") == [topic]
        assert (await a.get("/topics")).json() == [topic]
        assert (await b.get("/topics")).json() == []
        # consume: GROUP READ + TOPIC READ (join, poll, commit)
        join = {"topics": [topic], "auto_offset_reset": "earliest"}
        joined = await a.post(f"/api/v1/groups/{group}/members", json=join)
        assert joined.status_code == 201, joined.text
        member = joined.json()["member_id"]
        denied = await b.post(f"/api/v1/groups/{group}/members", json=join)
        assert denied.json()["code"] == "GROUP_AUTHORIZATION_FAILED"
        denied = await a.post(f"/api/v1/groups/{group}/members", json={"topics": [other]})
        assert denied.json()["code"] == "TOPIC_AUTHORIZATION_FAILED"
        base = f"/api/v1/groups/{group}/members/{member}"
        polled = await a.get(f"{base}/records", params={"timeout_ms": 100})
        assert polled.status_code == 200, polled.text
        commit = {"offsets": [{"topic": topic, "partition": 0, "offset": 1}]}
        assert (await a.post(f"{base}/commit", json=commit)).status_code == 200
        assert (await b.post(f"{base}/commit", json=commit)).status_code == 403
        # v2 consumer: create needs GROUP READ, subscription TOPIC READ
        v2_json = {"content-type": V2}
        instance = await a.post(f"/consumers/{group}", json={"name": "i1"}, headers=v2_json)
        assert instance.status_code == 200, instance.text
        subscribe = await a.post(
            f"/consumers/{group}/instances/i1/subscription",
            json={"topics": [other]},
            headers=v2_json,
        )
        assert (subscribe.status_code, subscribe.json()["error_code"]) == (403, 40301)
        # group admin: DESCRIBE (implied by READ) yes, DELETE no
        assert (await a.get(f"/api/v1/groups/{group}")).status_code == 200
        denied = await a.delete(f"/api/v1/groups/{group}")
        assert denied.json()["code"] == "GROUP_AUTHORIZATION_FAILED"
        # topic admin: CREATE, DELETE, ALTER_CONFIGS, cluster DESCRIBE all denied
        create = {"name": unique("sec-new"), "partitions": 1, "replication_factor": 1}
        assert (await a.post("/api/v1/topics", json=create)).status_code == 403
        assert (await a.delete(f"/api/v1/topics/{topic}")).status_code == 403
        configs = {"set": {"retention.ms": "60000"}}
        denied = await a.patch(f"/api/v1/topics/{topic}/configs", json=configs)
        assert denied.json()["code"] == "TOPIC_AUTHORIZATION_FAILED"
        denied = await a.get("/api/v1/brokers")
        assert denied.json()["code"] == "CLUSTER_AUTHORIZATION_FAILED"
        assert (await a.get("/api/v1/security/users")).status_code == 403
        # deny wins: a DENY READ on the topic stops reads at once
        async with secured.client(secured.admin_key) as admin:
            deny = _acl(principal, "TOPIC", topic, "READ", permission="DENY")
            assert (await admin.post("/api/v1/security/acls", json={"acls": [deny]})).is_success
        assert (await a.get(read, params={"offset": 0})).status_code == 403
        polled = await a.get(f"{base}/records", params={"timeout_ms": 100})
        assert polled.json()["code"] == "TOPIC_AUTHORIZATION_FAILED"
        assert (await a.post(f"/api/v1/topics/{topic}/records", json=record)).status_code == 200


async def _names(http: httpx.AsyncClient, path: str) -> list[str]:
    answer = await http.get(path)
    assert answer.status_code == 200, answer.text
    return [topic["name"] for topic in answer.json()["topics"]]


async def test_key_rotation_on_every_proxy(secured: Secured) -> None:
    name = unique("carol")
    old = await _user(secured, name, [_acl(f"User:{name}", "CLUSTER", "yak-cluster", "DESCRIBE")])
    async with secured.client(old, proxy=0) as http:
        made = await http.post(f"/api/v1/security/users/{name}/keys", json={})
        assert made.status_code == 403  # adding keys is CLUSTER ALTER
    async with secured.client(secured.admin_key, proxy=0) as admin:
        made = await admin.post(f"/api/v1/security/users/{name}/keys", json={})
        assert made.status_code == 201, made.text
        new = made.json()["api_key"]
        for proxy in (0, 1):
            await _eventually(secured, new, proxy, 200)
            await _eventually(secured, old, proxy, 200)
        revoked = await admin.delete(f"/api/v1/security/users/{name}/keys/{old.split('_')[1]}")
        assert revoked.status_code == 204
    async with secured.client(old, proxy=0) as http:
        assert (await http.get("/api/v1/brokers")).status_code == 401  # the next request
    started = time.monotonic()
    await _eventually(secured, old, 1, 401)
    assert time.monotonic() - started < 1.0
    await _eventually(secured, new, 1, 200)


async def _eventually(secured: Secured, key: str, proxy: int, status: int) -> None:
    """The other proxy follows etcd through its watch: milliseconds, bounded here at 2 s."""
    async with secured.client(key, proxy) as http:
        deadline = time.monotonic() + 2
        while (answer := await http.get("/api/v1/brokers")).status_code != status:
            assert time.monotonic() < deadline, answer.text
            await asyncio.sleep(0.01)  # another process's watch


async def test_sdk_and_cli_with_an_api_key(secured: Secured) -> None:
    topic = unique("sec-sdk")
    await _topic(secured, topic)
    name = unique("dora")
    key = await _user(secured, name, [_acl(f"User:{name}", "TOPIC", topic, "WRITE")])
    url = secured.cluster.proxy_url(1)
    async with AsyncProducer(url, api_key=key, linger_ms=0) as producer:
        written = await producer.send_and_wait(topic, b"v", key=b"k")
        assert written.offset == 0
    async with AsyncProducer(url, linger_ms=0, retries=0) as anonymous:
        with pytest.raises(AuthenticationError, match="credentials"):
            await anonymous.send_and_wait(topic, b"v")
    async with AsyncAdmin(url, username="nobody", password="x") as admin:
        with pytest.raises(AuthenticationError, match="user name or password"):
            await admin.list_groups()
    async with AsyncProducer(url, api_key=key, linger_ms=0, retries=0) as producer:
        with pytest.raises(TopicAuthorizationError):
            await producer.send_and_wait(unique("sec-none"), b"v")
    output = await asyncio.to_thread(
        _cli, "users", "list", "--url", url, "--api-key", secured.admin_key
    )
    assert f"User:{name}" in output
    output = await asyncio.to_thread(
        _cli, "produce", topic, "--value", "x", "--url", url, "--api-key", key, "-v"
    )
    assert "offset" in output or output.strip()
