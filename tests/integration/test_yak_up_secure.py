"""``yak up --secure`` as real processes: TLS everywhere, the cluster secret, mutual TLS.

One cluster (1 coordinator, 2 brokers, the proxy, the console, the schema registry) started
by the ``yak`` script exactly as an operator would, shared by the tests of this module:

* every service, the console too, answers on ``https://`` with a certificate of the local CA;
  keys, the secret and the admin's credentials are 0600 files;
* brokers' data plane and JSON API and the coordinator's admin API answer 401 without the
  cluster secret, health checks stay open;
* plain HTTP, a client that does not trust the CA, and a client certificate of another CA
  are refused by the proxy;
* a client certificate with CN ``alice`` is ``User:alice``: denied until an ACL allows it;
* the CLI finds the CA, the secret and the admin key through ``cluster.json``, and a topic
  with two replicas replicates records produced through the proxy;
* the schema registry answers on ``https://`` only to Yak's users (401 / 40101 without a
  credential or with a wrong password), and ``yak schemas`` registers and lists with the
  admin's key, as its etcd user ``yak-schema-registry``.
"""

from __future__ import annotations

import asyncio
import json
import stat
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tests.integration.ports import free_base_port, layout_offsets
from tests.integration.yak_up_process import yak_cli, yak_up
from yak.clients.broker import BrokerClient
from yak.clients.tls import ClientTls, ssl_context
from yak.security.local_ca import LocalCa

pytestmark = pytest.mark.integration

_BIN = Path(sys.executable).parent


class Secure:
    """The running cluster's files and URLs."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.document: dict[str, Any] = json.loads((data_dir / "cluster.json").read_text())
        self.ca = str(data_dir / "tls" / "ca.pem")
        self.secret = (data_dir / "cluster-secret").read_text().strip()
        credentials = json.loads((data_dir / "credentials.json").read_text())
        self.admin_key: str = credentials["api_key"]

    def urls(self, prefix: str) -> list[str]:
        return [str(p["url"]) for p in self.document["processes"] if p["name"].startswith(prefix)]

    @property
    def proxy(self) -> str:
        return self.urls("rest-proxy")[0]

    def client(self, *, cert: tuple[Path, Path] | None = None, **kw: Any) -> httpx.AsyncClient:
        context = ssl_context(self.ca, *(str(p) for p in cert) if cert else ())
        return httpx.AsyncClient(verify=context, timeout=20, **kw)

    def yak(self, *args: str) -> str:
        return yak_cli(self.data_dir, *args)


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secure]:
    data_dir = tmp_path_factory.mktemp("secure-up")
    base = free_base_port((*layout_offsets(brokers=2, coordinators=1), 60))
    args = ("--secure", "--schema-registry", "--data-dir", str(data_dir), "--base-port", str(base))
    with yak_up(*args, "--brokers", "2", "--coordinators", "1", stop_timeout_s=30):
        yield Secure(data_dir)


def test_services_serve_https_and_secrets_are_private(secure: Secure) -> None:
    for prefix in ("coordinator", "broker", "rest-proxy", "console", "schema-registry"):
        assert all(url.startswith("https://127.0.0.1:") for url in secure.urls(prefix)), prefix
    assert secure.document["security"]["ca"] == secure.ca
    for private in ("credentials.json", "cluster-secret", "tls/ca-key.pem", "tls/broker-0-key.pem"):
        assert stat.S_IMODE((secure.data_dir / private).stat().st_mode) == 0o600, private


async def test_the_internal_plane_needs_the_cluster_secret(secure: Secure) -> None:
    async with secure.client() as http:
        for broker in secure.urls("broker"):
            for path in ("/v1/produce", "/v1/fetch"):
                refused = await http.post(f"{broker}{path}", content=b"{}")
                assert refused.status_code == 401, path
                assert refused.json()["code"] == "UNAUTHENTICATED"
            assert (await http.get(f"{broker}/v1/partitions")).status_code == 401
            assert (await http.get(f"{broker}/healthz")).status_code == 200
            secret = {"x-yak-cluster-secret": secure.secret}
            assert (await http.get(f"{broker}/v1/partitions", headers=secret)).status_code == 200
        (coordinator,) = secure.urls("coordinator")
        assert (await http.get(f"{coordinator}/admin/v1/cluster")).status_code == 401
        assert (await http.get(f"{coordinator}/healthz")).status_code == 200
        (console,) = secure.urls("console")
        login = await http.get(f"{console}/", follow_redirects=True)  # pages need a login
        assert login.status_code == 200, login.status_code
        assert login.url.path == "/login"


async def test_plain_http_and_untrusted_parties_are_refused(secure: Secure, tmp_path: Path) -> None:
    plain = secure.proxy.replace("https://", "http://")
    async with httpx.AsyncClient(timeout=5) as http:
        with pytest.raises(httpx.TransportError):
            await http.get(f"{plain}/healthz")
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await http.get(f"{secure.proxy}/healthz")  # the system roots do not know the CA
    stranger = LocalCa.create(tmp_path / "other-ca").issue("mallory", client=True)
    async with secure.client(cert=(stranger.cert_file, stranger.key_file)) as http:
        with pytest.raises(httpx.TransportError):
            await http.get(f"{secure.proxy}/api/v1/topics")


async def test_a_client_certificate_is_the_principal(secure: Secure) -> None:
    topic = f"mtls-{uuid.uuid4().hex[:8]}"
    secure.yak("topics", "create", topic, "--partitions", "1", "--replication-factor", "2")
    ca = LocalCa.load(secure.data_dir / "tls")
    alice = ca.issue(f"client-{topic}", common_name="alice", client=True)
    record = {"records": [{"value": {"n": 1}}]}
    async with secure.client(cert=(alice.cert_file, alice.key_file)) as http:
        url = f"{secure.proxy}/api/v1/topics/{topic}/records"
        denied = await http.post(url, json=record)
        assert denied.status_code == 403, denied.text
        assert denied.json()["code"] == "TOPIC_AUTHORIZATION_FAILED"
        secure.yak(
            "acls", "add", "--principal", "User:alice", "-t", "TOPIC", "-n", topic, "-o", "WRITE"
        )
        deadline = time.monotonic() + 10
        while (allowed := await http.post(url, json=record)).status_code == 403:
            assert time.monotonic() < deadline, allowed.text
        assert allowed.status_code == 200, allowed.text
    async with secure.client() as anonymous:  # no certificate, no key: unauthenticated
        assert (await anonymous.post(url, json=record)).status_code == 401


async def test_records_produced_through_the_proxy_replicate(secure: Secure) -> None:
    topic = f"repl-{uuid.uuid4().hex[:8]}"
    assert topic in secure.yak(
        "topics", "create", topic, "--partitions", "1", "--replication-factor", "2"
    )
    headers = {"authorization": f"Bearer {secure.admin_key}"}
    async with secure.client(headers=headers) as http:
        url = f"{secure.proxy}/api/v1/topics/{topic}/records"
        records = {"records": [{"value": {"n": n}} for n in range(5)]}
        deadline = time.monotonic() + 20
        while (produced := await http.post(url, json=records)).status_code != 200:
            assert time.monotonic() < deadline, produced.text
    tls = ClientTls(secure.ca)
    for broker in secure.urls("broker"):
        async with BrokerClient(broker, tls=tls, cluster_secret=secure.secret) as client:
            deadline = time.monotonic() + 20
            while True:
                hosted = [p for p in (await client.partitions()).partitions if p.topic == topic]
                if hosted and hosted[0].high_watermark >= 5:
                    break
                assert time.monotonic() < deadline, (broker, hosted)
                await asyncio.sleep(0.1)


async def test_the_schema_registry_takes_yak_users_only(secure: Secure, tmp_path: Path) -> None:
    (registry,) = secure.urls("schema-registry")
    async with secure.client() as http:
        refused = await http.get(f"{registry}/subjects")
        assert refused.status_code == 401
        assert refused.json()["error_code"] == 40101
        wrong = await http.get(f"{registry}/subjects", auth=("admin", "not-the-password"))
        assert wrong.status_code == 401
        assert (await http.get(f"{registry}/healthz")).status_code == 200
    schema = tmp_path / "order.avsc"
    schema.write_text('{"type": "record", "name": "Order", "fields": []}')
    subject = f"orders-{uuid.uuid4().hex[:8]}-value"
    assert secure.yak("schemas", "register", subject, str(schema)).startswith("id ")
    assert subject in secure.yak("schemas", "subjects").split()
    bearer = {"authorization": f"Bearer {secure.admin_key}"}
    async with secure.client(headers=bearer) as http:
        latest = await http.get(f"{registry}/subjects/{subject}/versions/latest")
        assert latest.json()["version"] == 1


def test_confluents_client_logs_in_with_basic_auth_and_needs_an_acl_to_register(
    secure: Secure,
) -> None:
    """Confluent's ``SchemaRegistryClient`` unchanged (``basic.auth.user.info``, the local CA):
    reads with any user; registering ``<topic>-value`` needs WRITE on the topic's prefix."""
    user = f"app-{uuid.uuid4().hex[:8]}"
    secure.yak("users", "create", user, "--password", "app-secret", "--no-key")
    (registry,) = secure.urls("schema-registry")
    conf = {
        "url": registry,
        "ssl.ca.location": secure.ca,
        "basic.auth.user.info": f"{user}:app-secret",
    }
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    schema = Schema('{"type": "record", "name": "Order", "fields": []}', "AVRO")
    with SchemaRegistryClient(conf) as client:
        assert isinstance(client.get_subjects(), list)
        with pytest.raises(SchemaRegistryError) as denied:
            client.register_schema(f"{topic}-value", schema)
        assert denied.value.error_code == 40301
        secure.yak(
            "acls",
            "add",
            "--principal",
            f"User:{user}",
            "-t",
            "TOPIC",
            "-n",
            topic,
            "--pattern-type",
            "PREFIXED",
            "-o",
            "WRITE",
        )
        # The registry's ACL cache follows etcd's watch in another process: try again, bounded.
        deadline = time.monotonic() + 10
        while (schema_id := _register_unless_denied(client, f"{topic}-value", schema)) is None:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert client.get_latest_version(f"{topic}-value").schema_id == schema_id


def _register_unless_denied(
    client: SchemaRegistryClient, subject: str, schema: Schema
) -> int | None:
    try:
        return client.register_schema(subject, schema)
    except SchemaRegistryError as exc:
        if exc.error_code != 40301:
            raise
        return None
