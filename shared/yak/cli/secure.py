"""``yak up --secure``: TLS everywhere, a cluster secret, security on, a bootstrap super-user.

Files, all under ``<data-dir>`` (keys and secrets mode 0600)::

    tls/ca.pem, tls/ca-key.pem         the local CA (kept across restarts: clients trust it)
    tls/<service>.pem, -key.pem        each service's server certificate (127.0.0.1, localhost)
    tls/etcd.pem, etcd-key.pem         etcd's server certificate (every member's client port)
    tls/etcd-peer.pem, -key.pem        the members' certificate between themselves
    etcd-auth/<user>.password          etcd's root and each service kind's password
    cluster-secret                     the internal plane's secret (YAK_CLUSTER_SECRET_FILE)
    credentials.json                   {"user": "admin", "api_key": "yak_..."}

Every service gets ``YAK_TLS_CERT``/``YAK_TLS_KEY``/``YAK_TLS_CA``, the secret file and
``YAK_SECURITY=on`` with ``User:admin`` as super-user; the rest-proxy also asks for client
certificates (``YAK_TLS_CLIENT_AUTH=optional``), so a certificate from the CA logs in as its
CN. ``cluster.json`` names the files in its ``security`` section, and the CLI reads them from
there (``apply_cluster_security``): the CA bundle, the admin key, and the secret (for ``yak
topics`` and ``yak cluster``, which talk to the coordinators).

etcd is closed too (``yak.etcd_auth``): its client port speaks TLS only (``https://``, the
local CA's certificate), authentication is on, and each service kind logs in as its own etcd
user (``YAK_ETCD_USER`` and ``YAK_ETCD_PASSWORD_FILE``) whose role grants only the key ranges
it writes; the console has no etcd user at all. ``root``'s password is for ``yak up`` itself
(the role setup at each start, the admin's bootstrap) and for ``yak users create
--bootstrap``. An anonymous client gets nothing; no proxy writes partition state or
``security/`` (the proxies send user, key, ACL and quota changes to the coordinator).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yak import etcd_auth
from yak.errors import DuplicateResourceError
from yak.etcd_binary import EtcdBinary
from yak.metadata.keyspace import Keyspace
from yak.security.cluster_secret import new_cluster_secret
from yak.security.private_file import write_private
from yak.supervisor import ProcessSpec, StartupError

if TYPE_CHECKING:
    from yak.etcd_server import EtcdServerTls

# The certificate authority (cryptography), etcd's client (aetcd) and the credential store
# (argon2) are the server stack's: they are imported where a secure cluster is set up, so the
# client commands that only read its CA and key run on the SDK's dependencies alone (issue 31).

__all__ = [
    "ADMIN_USER",
    "apply_cluster_security",
    "bootstrap_admin",
    "cluster_api_key",
    "etcd_server_tls",
    "secure_spec",
    "security_section",
    "setup_etcd_auth",
    "write_tls_files",
]

ADMIN_USER = "admin"
#: Services that serve TLS (every one ``yak up`` starts).
_TLS_SERVICES = ("coordinator", "broker", "rest-proxy", "console", "schema-registry")


def _tls_dir(data_dir: Path) -> Path:
    return data_dir / "tls"


def security_section(data_dir: Path) -> dict[str, str]:
    """The ``security`` section of ``cluster.json``: where the CLI finds the CA and keys."""
    root = data_dir.resolve()
    return {
        "ca": str(_tls_dir(root) / "ca.pem"),
        "credentials": str(root / "credentials.json"),
        "cluster_secret_file": str(root / "cluster-secret"),
        "etcd_passwords": str(_etcd_auth_dir(root)),
    }


def _etcd_auth_dir(data_dir: Path) -> Path:
    return data_dir / "etcd-auth"


def etcd_server_tls(data_dir: Path) -> EtcdServerTls:
    """etcd's certificate (written by ``write_tls_files``) and the CA clients verify it with."""
    from yak.etcd_server import EtcdServerTls

    tls = _tls_dir(data_dir.resolve())
    return EtcdServerTls(
        tls / "etcd.pem",
        tls / "etcd-key.pem",
        tls / "ca.pem",
        peer_cert_file=tls / "etcd-peer.pem",
        peer_key_file=tls / "etcd-peer-key.pem",
    )


def _etcd_env(data_dir: Path, user: str) -> dict[str, str]:
    """What a client needs to log in to the secure etcd as ``user``."""
    root = data_dir.resolve()
    return {
        "YAK_ETCD_CA": str(_tls_dir(root) / "ca.pem"),
        "YAK_ETCD_USER": user,
        "YAK_ETCD_PASSWORD_FILE": str(_etcd_auth_dir(root) / f"{user}.password"),
    }


def _https(urls: str) -> str:
    return ",".join(url.replace("http://", "https://", 1) for url in urls.split(","))


def _serves_tls(name: str) -> bool:
    return name.startswith(_TLS_SERVICES)


def secure_spec(spec: ProcessSpec, data_dir: Path) -> ProcessSpec:
    """``spec`` with TLS (where the service supports it), the secret and security on."""
    files = security_section(data_dir)
    tls = _tls_dir(data_dir.resolve())
    env = {
        **spec.env,
        "YAK_TLS_CA": files["ca"],
        "YAK_CLUSTER_SECRET_FILE": files["cluster_secret_file"],
        "YAK_SECURITY": "on",
        "YAK_SUPER_USERS": f"User:{ADMIN_USER}",
    }
    url = spec.url
    health_url = spec.health_url
    if _serves_tls(spec.name):
        env["YAK_TLS_CERT"] = str(tls / f"{spec.name}.pem")
        env["YAK_TLS_KEY"] = str(tls / f"{spec.name}-key.pem")
        url = url.replace("http://", "https://", 1) if url else url
        health_url = health_url.replace("http://", "https://", 1) if health_url else health_url
    if spec.name.startswith("rest-proxy"):
        env["YAK_TLS_CLIENT_AUTH"] = "optional"
    if "YAK_ETCD" in env:
        env["YAK_ETCD"] = _https(env["YAK_ETCD"])
    user = etcd_auth.service_user(spec.name)
    if user is not None:
        env.update(_etcd_env(data_dir, user))
    for name in ("YAK_API_URL", "YAK_SCHEMA_REGISTRY_URL"):
        if name in env:
            env[name] = env[name].replace("http://", "https://", 1)
    return replace(spec, env=env, url=url, health_url=health_url, ca_file=files["ca"])


def write_tls_files(data_dir: Path, services: tuple[ProcessSpec, ...]) -> None:
    """The CA (kept if present), a fresh certificate per TLS service, and the secret."""
    from yak.etcd_peer_tls import issue_peer_cert
    from yak.security.local_ca import LocalCa

    ca = LocalCa.load_or_create(_tls_dir(data_dir))
    ca.issue("etcd")
    issue_peer_cert(ca)
    for spec in services:
        if _serves_tls(spec.name):
            ca.issue(spec.name)
    secret = data_dir / "cluster-secret"
    if not secret.exists():
        write_private(secret, new_cluster_secret().encode())


def setup_etcd_auth(data_dir: Path, etcd_url: str, cluster_id: str, binary: EtcdBinary) -> None:
    """Users, roles and authentication on the running etcd (idempotent: every start)."""
    passwords = etcd_auth.ensure_passwords(_etcd_auth_dir(data_dir))
    endpoint = etcd_url.split(",")[0]
    ca = etcd_server_tls(data_dir).ca_file
    try:
        etcd_auth.apply(binary.etcdctl, endpoint, ca, Keyspace(cluster_id), passwords)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        raise StartupError(f"etcd's users and roles could not be set up: {exc}") from exc


async def _create_admin(etcd_url: str, cluster_id: str, env: dict[str, str] | None) -> str:
    from yak.metadata.etcd_store import EtcdMetadataStore
    from yak.security.store import SecurityStore

    store = EtcdMetadataStore.from_url(etcd_url, env=env)
    try:
        security = SecurityStore(store, Keyspace(cluster_id))
        try:
            _, key, _ = await security.create_user(ADMIN_USER, with_key=True)
        except DuplicateResourceError:  # the user exists (credentials.json was removed): a new key
            key = await security.add_key(ADMIN_USER, "yak up --secure")
        assert key is not None
        return key.token
    finally:
        await store.aclose()


def bootstrap_admin(data_dir: Path, etcd_url: str, cluster_id: str) -> str:
    """The admin's API key: from ``credentials.json``, else created in etcd and written."""
    path = data_dir / "credentials.json"
    existing = cluster_api_key(None, data_dir, section={"credentials": str(path)})
    if existing is not None:
        return existing
    # As etcd's root when ``setup_etcd_auth`` made its password, else with this process's
    # ``YAK_ETCD_*`` (compose's secure-init).
    root = _etcd_env(data_dir, etcd_auth.ROOT_USER)
    env = root if Path(root["YAK_ETCD_PASSWORD_FILE"]).exists() else None
    token = asyncio.run(_create_admin(etcd_url, cluster_id, env))
    write_private(path, json.dumps({"user": ADMIN_USER, "api_key": token}).encode() + b"\n")
    return token


def _read_section(data_dir: Path) -> dict[str, Any]:
    try:
        document = json.loads((data_dir / "cluster.json").read_text())
    except (OSError, ValueError):
        return {}
    section = document.get("security") if isinstance(document, dict) else None
    return section if isinstance(section, dict) else {}


def apply_cluster_security(data_dir: Path) -> None:
    """Point this process's clients at a secure ``yak up`` cluster's CA and secret.

    Only defaults: ``YAK_TLS_CA`` and ``YAK_CLUSTER_SECRET[_FILE]`` already set win.
    """
    section = _read_section(data_dir)
    if isinstance(section.get("ca"), str):
        os.environ.setdefault("YAK_TLS_CA", section["ca"])
    secret_file = section.get("cluster_secret_file")
    if isinstance(secret_file, str) and not os.environ.get("YAK_CLUSTER_SECRET"):
        os.environ.setdefault("YAK_CLUSTER_SECRET_FILE", secret_file)


def cluster_api_key(
    api_key: str | None, data_dir: Path, *, section: dict[str, Any] | None = None
) -> str | None:
    """``api_key`` if given, else the admin key of a secure ``yak up`` cluster, else None."""
    if api_key is not None:
        return api_key
    section = _read_section(data_dir) if section is None else section
    path = section.get("credentials")
    if not isinstance(path, str):
        return None
    try:
        credentials = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    token = credentials.get("api_key") if isinstance(credentials, dict) else None
    return token if isinstance(token, str) else None
