"""``yak up --secure`` closes etcd: TLS only, authentication on, one user and role per service.

One real secure cluster (1 coordinator, 1 broker, the proxy, the console), started by the
``yak`` script. Against its etcd:

* an anonymous client — plain HTTP, or TLS without a user — can neither read nor write;
* the rest-proxy's etcd user is refused a write under ``partitions/``, ``topics/``,
  ``brokers/``, the controller key and ``security/`` (principals, ACLs, quotas), and may read
  them and write its consumer groups (``yak.etcd_auth``);
* yet users, keys, ACLs and quotas made through the proxy's security admin API work: the
  proxy sends them to the coordinator, whose user writes ``security/``;
* the broker's user may not write topics or security principals;
* root (``yak users create --bootstrap``'s credentials) may;
* an etcd set up with the older layout (the proxy writing ``security/``) is closed by the
  next setup, as a restart of ``yak up --secure`` runs it;
* the peer port takes only the members' certificate (not plain HTTP, not TLS without a
  certificate, not a user's certificate of the same CA);
* and the services work under their roles: a topic is created, records are produced, a
  producer id is handed out and a consumer instance joins its group.
"""

from __future__ import annotations

import json
import stat
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.ports import free_base_port, layout_offsets
from tests.integration.yak_up_process import yak_cli, yak_up
from yak import etcd_auth
from yak.clients.tls import ssl_context
from yak.errors import MetadataStoreError
from yak.etcd_server import EmbeddedEtcd, EtcdServerTls, free_ports
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace
from yak.security.local_ca import LocalCa

pytestmark = pytest.mark.integration

_BIN = Path(sys.executable).parent
#: etcd's answers to a client without a user: "user name is empty" or "permission denied".
_REFUSED = r"user name is empty|permission denied"


class Cluster:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.document: dict[str, Any] = json.loads((data_dir / "cluster.json").read_text())
        self.ca = str(data_dir / "tls" / "ca.pem")
        self.etcd = self.document["etcd"]["url"]
        self.admin_key = json.loads((data_dir / "credentials.json").read_text())["api_key"]

    def url(self, name: str) -> str:
        (process,) = [p for p in self.document["processes"] if p["name"] == name]
        return str(process["url"])

    def env_of(self, user: str | None) -> dict[str, str]:
        env = {"YAK_ETCD_CA": self.ca}
        if user is not None:
            env["YAK_ETCD_USER"] = user
            env["YAK_ETCD_PASSWORD_FILE"] = str(self.data_dir / "etcd-auth" / f"{user}.password")
        return env

    @asynccontextmanager
    async def store(
        self, user: str | None, url: str | None = None
    ) -> AsyncIterator[EtcdMetadataStore]:
        store = EtcdMetadataStore.from_url(url or self.etcd, env=self.env_of(user), timeout_s=3)
        try:
            yield store
        finally:
            await store.aclose()

    def yak(self, *args: str) -> str:
        return yak_cli(self.data_dir, *args)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    data_dir = tmp_path_factory.mktemp("etcd-roles")
    base = free_base_port(layout_offsets(brokers=1, coordinators=1))
    args = ("--secure", "--data-dir", str(data_dir), "--base-port", str(base))
    with yak_up(*args, "--brokers", "1", "--coordinators", "1"):
        yield Cluster(data_dir)


def test_etcd_speaks_tls_and_its_passwords_are_private(cluster: Cluster) -> None:
    assert cluster.etcd.startswith("https://127.0.0.1:")
    for user in ("root", "yak-coordinator", "yak-broker", "yak-rest-proxy"):
        path = cluster.data_dir / "etcd-auth" / f"{user}.password"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, user


async def test_an_anonymous_client_reads_and_writes_nothing(cluster: Cluster) -> None:
    async with cluster.store(None) as anonymous:  # TLS, trusts the CA, no user
        with pytest.raises(MetadataStoreError, match=_REFUSED):
            await anonymous.range_prefix("/yak/local/")
        with pytest.raises(MetadataStoreError, match=_REFUSED):
            await anonymous.get("/yak/local/security/principals/admin")
        with pytest.raises(MetadataStoreError, match=_REFUSED):
            await anonymous.put("/yak/local/security/principals/mallory", b"{}")
    plain = cluster.etcd.replace("https://", "http://")
    async with cluster.store(None, plain) as plain_client:
        with pytest.raises(MetadataStoreError):
            await plain_client.get("/yak/local/controller")
    async with cluster.store("yak-rest-proxy") as proxy:  # nothing was written
        assert await proxy.get("/yak/local/security/principals/mallory") is None


async def test_a_proxy_may_not_write_partition_state(cluster: Cluster) -> None:
    async with cluster.store("yak-rest-proxy") as proxy:
        admin = await proxy.get("/yak/local/security/principals/admin")
        assert admin is not None  # it reads principals to authenticate users
        for key in (
            "/yak/local/partitions/orders/0",
            "/yak/local/topics/orders",
            "/yak/local/controller",
            "/yak/local/brokers/0",
            "/yak/local/broker-records/0",
            "/yak/local/security/principals/mallory",
            "/yak/local/security/acls/mallory-all",
            "/yak/local/security/quotas/User:mallory",
        ):
            with pytest.raises(MetadataStoreError, match="permission denied"):
                await proxy.put(key, b"{}")
        with pytest.raises(MetadataStoreError, match="permission denied"):
            await proxy.delete("/yak/local/security/principals/admin")
        key = f"/yak/local/groups/roles-{uuid.uuid4().hex[:6]}/state"
        await proxy.put(key, b"{}")  # its own range
        assert await proxy.delete(key)
        with pytest.raises(MetadataStoreError, match="permission denied"):
            await proxy.put("/yak/other-cluster/groups/g/state", b"{}")


async def test_a_broker_writes_only_registrations_and_partition_state(cluster: Cluster) -> None:
    async with cluster.store("yak-broker") as broker:
        for key in ("/yak/local/topics/orders", "/yak/local/security/principals/mallory"):
            with pytest.raises(MetadataStoreError, match="permission denied"):
                await broker.put(key, b"{}")
    async with cluster.store("yak-coordinator") as coordinator:  # the proxies' security writes
        await coordinator.put("/yak/local/security/roles-test", b"x")
        assert await coordinator.delete("/yak/local/security/roles-test")
    async with cluster.store("root") as root:  # yak users create --bootstrap's credentials
        await root.put("/yak/local/security/roles-test", b"x")
        assert await root.delete("/yak/local/security/roles-test")


def test_the_services_work_under_their_roles(cluster: Cluster) -> None:
    topic = f"roles-{uuid.uuid4().hex[:6]}"
    cluster.yak("topics", "create", topic, "--partitions", "1", "--replication-factor", "1")
    proxy = cluster.url("rest-proxy")
    headers = {"authorization": f"Bearer {cluster.admin_key}"}
    with httpx.Client(verify=ssl_context(cluster.ca), headers=headers, timeout=20) as http:
        deadline = time.monotonic() + 30
        records = {"records": [{"value": {"n": 1}}]}
        while (
            produced := http.post(f"{proxy}/api/v1/topics/{topic}/records", json=records)
        ).status_code != 200:
            assert time.monotonic() < deadline, produced.text
            time.sleep(0.2)
        assert http.post(f"{proxy}/api/v1/producers").status_code == 201  # producers/next-id
        v2 = {"content-type": "application/vnd.kafka.v2+json"}
        created = http.post(f"{proxy}/consumers/roles-g", json={"format": "json"}, headers=v2)
        assert created.status_code == 200, created.text  # groups/<g>/members/<m>
        instance = created.json()["base_uri"]
        subscribed = http.post(f"{instance}/subscription", json={"topics": [topic]}, headers=v2)
        assert subscribed.status_code == 204, subscribed.text
        assert http.delete(instance, headers=v2).status_code == 204


@pytest.fixture
def closed_etcd(tmp_path: Path) -> Iterator[tuple[str, Path, dict[str, str]]]:
    """A real etcd set up first with the older layout (the proxy writing ``security/``), then
    as ``yak up --secure`` sets its own now, twice (a restart): the proxy's grant is taken
    back."""
    ca = LocalCa.create(tmp_path / "tls")
    cert = ca.issue("etcd")
    client, peer = free_ports(2)
    tls = EtcdServerTls(cert.cert_file, cert.key_file, ca.cert_file)
    server = EmbeddedEtcd(tmp_path / "etcd", client, peer, tls=tls, unsafe_no_fsync=True)
    server.start()
    try:
        passwords = etcd_auth.ensure_passwords(tmp_path / "etcd-auth")
        for older in (True, False, False):  # the second default run changes nothing
            etcd_auth.apply(
                server.binary.etcdctl,
                server.endpoint,
                ca.cert_file,
                Keyspace("local"),
                passwords,
                proxy_writes_security=older,
            )
        yield server.endpoint, ca.cert_file, passwords
    finally:
        server.stop()


async def test_closed_a_proxy_is_refused_the_security_prefix(
    closed_etcd: tuple[str, Path, dict[str, str]],
) -> None:
    url, ca, passwords = closed_etcd

    def env(user: str | None) -> dict[str, str]:
        base = {"YAK_ETCD_CA": str(ca)}
        return (
            base
            if user is None
            else {**base, "YAK_ETCD_USER": user, "YAK_ETCD_PASSWORD": passwords[user]}
        )

    root = EtcdMetadataStore.from_url(url, env=env("root"), timeout_s=3)
    proxy = EtcdMetadataStore.from_url(url, env=env("yak-rest-proxy"), timeout_s=3)
    anonymous = EtcdMetadataStore.from_url(url, env=env(None), timeout_s=3)
    try:
        await root.put("/yak/local/security/principals/admin", b"{}")
        assert await proxy.get("/yak/local/security/principals/admin") is not None
        for key in (
            "/yak/local/security/principals/mallory",
            "/yak/local/security/acls/mallory-all",
            "/yak/local/security/quotas/User:mallory",
            "/yak/local/partitions/orders/0",
        ):
            with pytest.raises(MetadataStoreError, match="permission denied"):
                await proxy.put(key, b"{}")
        with pytest.raises(MetadataStoreError, match="permission denied"):
            await proxy.delete("/yak/local/security/principals/admin")
        await proxy.put("/yak/local/groups/g/state", b"{}")
        with pytest.raises(MetadataStoreError, match=_REFUSED):
            await anonymous.get("/yak/local/security/principals/admin")
        with pytest.raises(MetadataStoreError, match=_REFUSED):
            await anonymous.put("/yak/local/security/principals/mallory", b"{}")
    finally:
        for store in (root, proxy, anonymous):
            await store.aclose()


def test_users_and_acls_made_through_the_proxy_work(cluster: Cluster) -> None:
    """The proxy's etcd user may not write ``security/``, yet its security admin API works
    end to end: the writes go to the coordinator, and each is in force on the proxy at once
    (read-your-writes)."""
    topic = f"acl-{uuid.uuid4().hex[:6]}"
    cluster.yak("topics", "create", topic, "--partitions", "1", "--replication-factor", "1")
    api = f"{cluster.url('rest-proxy')}/api/v1"
    admin = {"authorization": f"Bearer {cluster.admin_key}"}
    name = f"dora-{uuid.uuid4().hex[:6]}"
    with httpx.Client(verify=ssl_context(cluster.ca), timeout=20) as http:
        made = http.post(f"{api}/security/users", json={"name": name}, headers=admin)
        assert made.status_code == 201, made.text
        dora = {"authorization": f"Bearer {made.json()['api_key']['api_key']}"}
        again = http.post(f"{api}/security/users", json={"name": name}, headers=admin)
        assert again.status_code == 409, again.text
        assert http.get(f"{api}/topics/{topic}", headers=dora).status_code == 403
        acl = {
            "principal": f"User:{name}",
            "resource_type": "TOPIC",
            "resource_name": topic,
            "operation": "DESCRIBE",
        }
        added = http.post(f"{api}/security/acls", json={"acls": [acl]}, headers=admin)
        assert added.status_code == 201, added.text
        described = http.get(f"{api}/topics/{topic}", headers=dora)
        assert described.status_code == 200, described.text
        # Dora may not administer security: the proxy refuses before the coordinator is asked.
        refused = http.post(f"{api}/security/users", json={"name": "mallory"}, headers=dora)
        assert refused.status_code == 403, refused.text
        quota = {"produce_bytes_per_s": 1000}
        path = f"{api}/security/quotas/User:{name}"
        assert http.put(path, json=quota, headers=admin).status_code == 200
        assert http.get(path, headers=admin).json()["produce_bytes_per_s"] == 1000
        assert http.delete(path, headers=admin).status_code == 204
        removed = http.delete(
            f"{api}/security/acls", params={"principal": f"User:{name}"}, headers=admin
        )
        assert removed.json()["acls"] == [{**acl, "pattern_type": "LITERAL", "permission": "ALLOW"}]
        assert http.get(f"{api}/topics/{topic}", headers=dora).status_code == 403
        assert http.delete(f"{api}/security/users/{name}", headers=admin).status_code == 204
        assert http.get(f"{api}/topics/{topic}", headers=dora).status_code == 401


def test_the_peer_port_takes_only_the_members_certificate(cluster: Cluster) -> None:
    port = int(cluster.etcd.rsplit(":", 1)[1]) + 1  # yak up: peer port = client port + 1
    peer = f"https://127.0.0.1:{port}/members"
    tls = cluster.data_dir / "tls"
    with httpx.Client(timeout=5) as plain, pytest.raises(httpx.HTTPError):
        plain.get(peer.replace("https://", "http://"))
    anonymous = ssl_context(cluster.ca)
    with httpx.Client(verify=anonymous, timeout=5) as no_cert, pytest.raises(httpx.HTTPError):
        no_cert.get(peer)
    alice = LocalCa.load(tls).issue("alice-peer", common_name="alice", client=True)
    user = ssl_context(cluster.ca, str(alice.cert_file), str(alice.key_file))
    with httpx.Client(verify=user, timeout=5) as same_ca, pytest.raises(httpx.HTTPError):
        same_ca.get(peer)  # a user's certificate of the same CA is no member
    member = ssl_context(cluster.ca, str(tls / "etcd-peer.pem"), str(tls / "etcd-peer-key.pem"))
    with httpx.Client(verify=member, timeout=5) as etcd_peer:
        assert etcd_peer.get(peer).status_code == 200
