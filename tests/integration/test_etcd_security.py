"""``EtcdMetadataStore.from_url`` against an etcd with authentication, and one with TLS.

Each test starts its own etcd process (the one ``find_etcd`` chooses): the first enables
authentication with ``etcdctl`` (root user and role), the second listens on ``https://`` with
``--client-cert-auth`` and certificates of a ``LocalCa``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from yak.errors import MetadataStoreError
from yak.etcd_binary import find_etcd
from yak.etcd_server import EmbeddedEtcd, free_ports
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.security.local_ca import LocalCa

pytestmark = pytest.mark.integration

_ETCD = find_etcd()


def _etcdctl(endpoint: str, *args: str) -> None:
    argv = [str(_ETCD.etcdctl), f"--endpoints={endpoint}", *args]
    subprocess.run(argv, check=True, capture_output=True, timeout=30)


@pytest.fixture
def auth_etcd(tmp_path: Path) -> Iterator[str]:
    client, peer = free_ports(2)
    server = EmbeddedEtcd(tmp_path / "etcd", client, peer, unsafe_no_fsync=True).start()
    try:
        _etcdctl(server.endpoint, "user", "add", "root:root-pw", "--interactive=false")
        _etcdctl(server.endpoint, "user", "grant-role", "root", "root")
        _etcdctl(server.endpoint, "auth", "enable")
        yield server.endpoint
    finally:
        server.stop()


async def test_a_user_and_password_from_the_environment_authenticate(auth_etcd: str) -> None:
    env = {"YAK_ETCD_USER": "root", "YAK_ETCD_PASSWORD": "root-pw"}
    store = EtcdMetadataStore.from_url(auth_etcd, env=env)
    try:
        await store.put("/yak/t/key", b"v")
        got = await store.get("/yak/t/key")
        assert got is not None
        assert got.value == b"v"
    finally:
        await store.aclose()
    anonymous = EtcdMetadataStore.from_url(auth_etcd, env={})
    try:
        with pytest.raises(MetadataStoreError):
            await anonymous.put("/yak/t/key", b"w")
    finally:
        await anonymous.aclose()


@pytest.fixture
def tls_etcd(tmp_path: Path) -> Iterator[tuple[str, LocalCa]]:
    ca = LocalCa.create(tmp_path / "tls")
    server_cert = ca.issue("etcd")
    client, peer = free_ports(2)
    url = f"https://127.0.0.1:{client}"
    peer_url = f"http://127.0.0.1:{peer}"
    argv = [
        str(_ETCD.path),
        f"--data-dir={tmp_path / 'etcd'}",
        f"--listen-client-urls={url}",
        f"--advertise-client-urls={url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=default={peer_url}",
        f"--cert-file={server_cert.cert_file}",
        f"--key-file={server_cert.key_file}",
        f"--trusted-ca-file={ca.cert_file}",
        "--client-cert-auth",
    ]
    if _ETCD.version.has_unsafe_no_fsync:
        argv.append("--unsafe-no-fsync")
    with (tmp_path / "etcd.log").open("wb") as log:
        env = {**os.environ, **_ETCD.env()}
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        yield url, ca
    finally:
        process.terminate()
        process.wait(10)


async def _put_with_retries(store: EtcdMetadataStore) -> None:
    deadline = time.monotonic() + 20
    while True:  # etcd was just started: wait until it listens
        try:
            await store.put("/yak/t/key", b"v")
            return
        except MetadataStoreError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def test_tls_with_a_client_certificate(tls_etcd: tuple[str, LocalCa]) -> None:
    url, ca = tls_etcd
    client = ca.issue("yak-client", common_name="yak", client=True)
    env = {
        "YAK_ETCD_CA": str(ca.cert_file),
        "YAK_ETCD_CERT": str(client.cert_file),
        "YAK_ETCD_KEY": str(client.key_file),
    }
    store = EtcdMetadataStore.from_url(url, env=env, timeout_s=2)
    try:
        await _put_with_retries(store)
        got = await store.get("/yak/t/key")
        assert got is not None
        assert got.value == b"v"
    finally:
        await store.aclose()
    no_cert = EtcdMetadataStore.from_url(url, env={"YAK_ETCD_CA": str(ca.cert_file)}, timeout_s=2)
    try:
        with pytest.raises(MetadataStoreError):
            await no_cert.put("/yak/t/key", b"w")
    finally:
        await no_cert.aclose()
