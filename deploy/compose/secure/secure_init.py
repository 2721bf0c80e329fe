"""One-shot set-up of ``docker-compose.secure.yml``: its ``secure-init`` and ``etcd-init``.

``python secure_init.py SECRETS`` (``secure-init``, as root, before anything else starts)
writes what ``yak up --secure`` writes into its data folder (``yak.cli.secure``), each part
into the volume of the services that need it, and nothing into a volume that does not:

    yak-init (INIT, the two one-shots only)
        ca/ca.pem, ca/ca-key.pem       a local CA, kept across runs (clients keep trusting it)
        etcd-auth/<user>.password      etcd's root and each service kind's password
                                       (``yak.etcd_auth.ensure_passwords``)
    yak-secrets (SECRETS, every Yak service, read-only)
        tls/ca.pem                     the CA's certificate
        tls/<service>.pem, -key.pem    a server certificate per service, naming the service's
                                       compose host name, localhost and 127.0.0.1 (the proxies'
                                       also name the load balancer, ``lb``)
        cluster-secret                 the internal plane's secret (YAK_CLUSTER_SECRET_FILE)
    yak-etcd-tls (ETCD_TLS, the etcd members, read-only)
        ca.pem, etcd.pem, etcd-key.pem the members' client-port certificate (every member's
                                       name, the alias ``etcd``, localhost, 127.0.0.1)
        etcd-peer.pem, -key.pem        the members' certificate between themselves (CN
                                       ``yak-etcd-peer``, ``yak.etcd_peer_tls``)
    yak-etcd-<kind> (ETCD_AUTH/<kind>, that kind's services, read-only)
        yak-<kind>.password            the one etcd password those services log in with

The CA's key stays in ``yak-init``: a service that could read it could issue itself an etcd
peer certificate, or a client certificate naming ``admin``. Every file a Yak service reads
is handed to its user (uid 10001); etcd's files stay root's.

``python secure_init.py --etcd SECRETS`` (``etcd-init``, once the members are healthy; its
image is Yak's with etcd's ``etcdctl``) closes etcd: ``yak.etcd_auth.apply`` creates root,
the role and user of each service kind and turns authentication on; a role-less user
``yak-health`` (password ``yak-health``, no secret: it may read and write nothing) lets the
members' health checks run ``etcdctl endpoint health``, which etcd answers "permission
denied", hence healthy, where an anonymous client gets "user name is empty". Then, as etcd's
root (``YAK_ETCD_USER``/``YAK_ETCD_PASSWORD_FILE`` in its environment), it creates the
super-user ``admin`` like ``yak users create --bootstrap`` and writes ``credentials.json``
and ``console-api-key`` (the key alone, for the console's sampler) into SECRETS.

Both read ``YAK_CLUSTER_ID``; ``--etcd`` also ``YAK_ETCD``. Both are idempotent: run again,
they keep the CA, the secret, the passwords and the admin's key.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from yak import etcd_auth
from yak.cli.secure import bootstrap_admin
from yak.etcd_peer_tls import issue_peer_cert
from yak.metadata.keyspace import Keyspace
from yak.security.cluster_secret import new_cluster_secret
from yak.security.local_ca import IssuedCert, LocalCa, write_private

SERVICES = (
    "coordinator-0",
    "coordinator-1",
    "broker-0",
    "broker-1",
    "broker-2",
    "rest-proxy-0",
    "rest-proxy-1",
    "console",
    "schema-registry",
)
ETCD_MEMBERS = ("etcd-0", "etcd-1", "etcd-2")
#: Service kinds with an etcd user (the console talks to the proxies only).
ETCD_KINDS = ("coordinator", "broker", "rest-proxy", "schema-registry")
#: Where docker-compose.secure.yml mounts the one-shots' other volumes.
INIT = Path("/var/lib/yak/init")
ETCD_TLS = Path("/var/lib/yak/etcd-tls")
ETCD_AUTH = Path("/var/lib/yak/etcd-auth")
ETCDCTL = Path("/usr/local/bin/etcdctl")
#: The Yak image's user, who must read the files of yak-secrets and yak-etcd-<kind>.
YAK_UID = 10001
#: The members' health check logs in as this user (its password is its name).
HEALTH_USER = "yak-health"


def hosts_of(service: str) -> tuple[str, ...]:
    """The names a service's certificate is valid for."""
    extra = ("lb",) if service.startswith("rest-proxy") else ()
    return (service, *extra, "localhost", "127.0.0.1")


def etcd_hosts() -> tuple[str, ...]:
    """The names the members' certificates are valid for (``etcd`` is their shared alias)."""
    return (*ETCD_MEMBERS, "etcd", "localhost", "127.0.0.1")


def _load_ca(folder: Path, old: Path) -> LocalCa:
    """The CA in ``folder``; one that an earlier version kept in ``old`` (the secrets
    volume) moves here, so clients keep trusting it, and its key leaves ``old``."""
    if not (folder / "ca-key.pem").exists() and (old / "ca-key.pem").exists():
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copyfile(old / "ca.pem", folder / "ca.pem")
        write_private(folder / "ca-key.pem", (old / "ca-key.pem").read_bytes())
    (old / "ca-key.pem").unlink(missing_ok=True)
    return LocalCa.load_or_create(folder)


def _install(issued: IssuedCert, folder: Path, name: str) -> None:
    """Copy a certificate and its key (mode 0600) into ``folder`` as ``<name>[-key].pem``."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(issued.cert_file, folder / f"{name}.pem")
    write_private(folder / f"{name}-key.pem", issued.key_file.read_bytes())


def _hand_over(*folders: Path) -> None:
    """Give everything under ``folders`` to the Yak image's user (when run as root)."""
    if os.geteuid() != 0:
        return
    for folder in folders:
        for path in [folder, *folder.rglob("*")]:
            os.chown(path, YAK_UID, YAK_UID)


def write_files(
    secrets: Path, init: Path = INIT, etcd_tls: Path = ETCD_TLS, etcd_auth_dir: Path = ETCD_AUTH
) -> None:
    """``secure-init``: the CA, every certificate, the secret and the etcd passwords."""
    tls = secrets / "tls"
    ca = _load_ca(init / "ca", tls)
    tls.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ca.cert_file, tls / "ca.pem")
    for service in SERVICES:
        _install(ca.issue(service, hosts=hosts_of(service)), tls, service)
    etcd_tls.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ca.cert_file, etcd_tls / "ca.pem")
    _install(ca.issue("etcd", hosts=etcd_hosts()), etcd_tls, "etcd")
    _install(issue_peer_cert(ca, hosts=etcd_hosts()), etcd_tls, "etcd-peer")
    secret = secrets / "cluster-secret"
    if not secret.exists():
        write_private(secret, new_cluster_secret().encode())
    passwords = etcd_auth.ensure_passwords(init / "etcd-auth")
    for kind in ETCD_KINDS:
        user = f"yak-{kind}"
        write_private(etcd_auth_dir / kind / f"{user}.password", passwords[user].encode())
    _hand_over(secrets, init, *(etcd_auth_dir / kind for kind in ETCD_KINDS))
    print(f"certificates, the cluster secret and etcd's passwords are written ({secrets})")


def _add_health_user(endpoints: str, ca_file: Path, root_password: str) -> None:
    """The role-less ``yak-health`` (as root: authentication is on by now); its password is
    set again each run, in case someone changed it."""
    env = {**os.environ, "ETCDCTL_USER": etcd_auth.ROOT_USER, "ETCDCTL_PASSWORD": root_password}
    base = [str(ETCDCTL), f"--endpoints={endpoints}", f"--cacert={ca_file}", "user"]
    for step in ("add", "passwd"):
        done = subprocess.run(
            [*base, step, HEALTH_USER, "--interactive=false"],
            input=HEALTH_USER,
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
            check=False,
        )
        if done.returncode != 0 and "already exists" not in done.stderr:
            raise RuntimeError(f"etcdctl user {step} {HEALTH_USER}: {done.stderr.strip()}")


def close_etcd(secrets: Path, init: Path = INIT) -> None:
    """``etcd-init``: users, roles and authentication on etcd, then the admin's key."""
    endpoints = os.environ["YAK_ETCD"]
    cluster_id = os.environ.get("YAK_CLUSTER_ID", "compose")
    ca_file = secrets / "tls" / "ca.pem"
    passwords = etcd_auth.ensure_passwords(init / "etcd-auth")
    etcd_auth.apply(ETCDCTL, endpoints, ca_file, Keyspace(cluster_id), passwords)
    _add_health_user(endpoints, ca_file, passwords[etcd_auth.ROOT_USER])
    token = bootstrap_admin(secrets, endpoints, cluster_id)
    write_private(secrets / "console-api-key", token.encode())
    print(f"etcd's users and roles are set, authentication is on; the admin's key is in {secrets}")


def main(argv: list[str]) -> None:
    closing = argv[:1] == ["--etcd"]
    rest = argv[1:] if closing else argv
    secrets = Path(rest[0] if rest else "/var/lib/yak/secrets")
    if closing:
        close_etcd(secrets)
    else:
        write_files(secrets)


if __name__ == "__main__":
    main(sys.argv[1:])
