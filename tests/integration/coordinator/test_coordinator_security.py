"""The coordinator's admin API with ``YAK_SECURITY=on``, against a real cluster: a secured
coordinator, one broker and a secured rest-proxy.

* Admin calls without a credential (or with a wrong one) answer 401; an allowed user is
  served; a user without the ACL gets 403.
* The proxy forwards its caller's credential: a user with TOPIC CREATE creates a topic through
  the proxy (the coordinator authorizes that user, not the proxy).
* ``yak topics`` takes ``--api-key``.
* A 401 carries the Bearer and Basic challenge; refusals are in the coordinator's audit log.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from loadtest.local_cluster import LocalCluster, local_cluster
from yak.cli.main import app as yak_cli
from yak.etcd_server import EmbeddedEtcd

pytestmark = pytest.mark.integration

_SECURE = {"YAK_SECURITY": "on", "YAK_SUPER_USERS": "User:admin"}


class Secured:
    def __init__(self, cluster: LocalCluster, admin_key: str) -> None:
        self.cluster = cluster
        self.admin_key = admin_key

    def coordinator(self, key: str | None) -> httpx.AsyncClient:
        headers = {"authorization": f"Bearer {key}"} if key else {}
        return httpx.AsyncClient(base_url=self.cluster.coordinator_url, headers=headers, timeout=30)

    def proxy(self, key: str) -> httpx.AsyncClient:
        headers = {"authorization": f"Bearer {key}"}
        return httpx.AsyncClient(base_url=self.cluster.proxy_url(0), headers=headers, timeout=30)

    async def user(self, acls: list[dict[str, Any]]) -> str:
        name = f"u-{uuid.uuid4().hex[:8]}"
        async with self.proxy(self.admin_key) as admin:
            made = await admin.post("/api/v1/security/users", json={"name": name})
            assert made.status_code == 201, made.text
            for acl in acls:
                acl["principal"] = f"User:{name}"
            if acls:
                added = await admin.post("/api/v1/security/acls", json={"acls": acls})
                assert added.status_code == 201, added.text
        key: str = made.json()["api_key"]["api_key"]
        return key


def _cli(*args: str) -> Any:
    return CliRunner().invoke(yak_cli, list(args))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd) -> Iterator[Secured]:
    folder: Path = tmp_path_factory.mktemp("secure-coordinator")
    cluster_id = f"csec-{uuid.uuid4().hex[:8]}"
    made = _cli(
        *("users", "create", "admin", "--bootstrap"),
        *("--etcd", etcd.endpoint, "--cluster-id", cluster_id),
    )
    assert made.exit_code == 0, made.output
    admin_key = made.output.strip().splitlines()[-1]
    with local_cluster(folder, etcd, cluster_id, brokers=1, coordinator_env=_SECURE) as running:
        running.start_proxy(0, **_SECURE)
        yield Secured(running, admin_key)


def _topic_acl(name: str, operation: str, pattern: str = "LITERAL") -> dict[str, Any]:
    return {
        "resource_type": "TOPIC",
        "resource_name": name,
        "pattern_type": pattern,
        "operation": operation,
    }


async def test_admin_calls_need_a_credential_and_an_acl(secured: Secured) -> None:
    async with secured.coordinator(None) as anonymous:
        assert (await anonymous.get("/readyz")).status_code == 200
        for method, path in (("GET", "/admin/v1/topics"), ("GET", "/admin/v1/cluster")):
            answer = await anonymous.request(method, path)
            assert answer.status_code == 401, path
            assert answer.json()["code"] == "UNAUTHENTICATED"
            assert 'Bearer realm="yak"' in answer.headers["www-authenticate"]
        body = {"name": "t", "partitions": 1, "replication_factor": 1}
        assert (await anonymous.post("/admin/v1/topics", json=body)).status_code == 401
    async with secured.coordinator("yak_0123456789abcdef_" + "x" * 43) as wrong:
        assert (await wrong.get("/admin/v1/cluster")).status_code == 401
    async with secured.coordinator(secured.admin_key) as admin:
        assert (await admin.get("/admin/v1/cluster")).status_code == 200
    nobody = await secured.user([])
    async with secured.coordinator(nobody) as denied:
        answer = await denied.get("/admin/v1/cluster")
        assert answer.status_code == 403
        assert answer.json()["code"] == "CLUSTER_AUTHORIZATION_FAILED"
        name = f"sec-{uuid.uuid4().hex[:6]}"
        body = {"name": name, "partitions": 1, "replication_factor": 1}
        answer = await denied.post("/admin/v1/topics", json=body)
        assert answer.status_code == 403
        assert answer.json()["code"] == "TOPIC_AUTHORIZATION_FAILED"
        assert (await denied.get("/admin/v1/topics")).json() == {"topics": []}
    log = (secured.cluster.folder / "logs" / "coordinator.log").read_text()
    audited = [json.loads(line) for line in log.splitlines() if line.startswith('{"time"')]
    refused = {(a["action"], a["result"], a["resource"]) for a in audited}
    assert ("GET /admin/v1/cluster", "unauthenticated", "") in refused
    assert ("POST /admin/v1/topics", "denied", f"TOPIC:{name}") in refused


async def test_the_proxy_forwards_the_callers_credential(secured: Secured) -> None:
    prefix = f"fwd-{uuid.uuid4().hex[:6]}"
    creator = await secured.user(
        [_topic_acl(prefix, "CREATE", "PREFIXED"), _topic_acl(prefix, "DESCRIBE", "PREFIXED")]
    )
    async with secured.proxy(creator) as proxy:
        body = {"name": f"{prefix}-a", "partitions": 1, "replication_factor": 1}
        made = await proxy.post("/api/v1/topics", json=body)
        assert made.status_code == 201, made.text
        listed = await proxy.get("/api/v1/topics")
        assert [t["name"] for t in listed.json()["topics"]] == [f"{prefix}-a"]
        refused = await proxy.post("/api/v1/topics", json={**body, "name": "elsewhere"})
        assert refused.status_code == 403
    async with secured.coordinator(creator) as coordinator:
        listed = await coordinator.get("/admin/v1/topics")
        assert [t["name"] for t in listed.json()["topics"]] == [f"{prefix}-a"]


def test_yak_topics_takes_an_api_key(secured: Secured) -> None:
    url = secured.cluster.coordinator_url
    refused = _cli("topics", "list", "--coordinator", url)
    assert refused.exit_code == 1
    assert "UNAUTHENTICATED" in refused.output
    listed = _cli("topics", "list", "--coordinator", url, "--api-key", secured.admin_key)
    assert listed.exit_code == 0, listed.output
    status = _cli("cluster", "status", "--coordinator", url, "--api-key", secured.admin_key)
    assert status.exit_code == 0, status.output
