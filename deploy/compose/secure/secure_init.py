"""One-shot set-up of ``docker-compose.secure.yml``, run by its ``secure-init`` service.

Writes into the ``yak-secrets`` volume (``SECRETS`` below, mounted read-only by every
service), the way ``yak up --secure`` writes into its data folder (``yak.cli.secure``):

    tls/ca.pem, tls/ca-key.pem     a local CA, kept across runs (clients keep trusting it)
    tls/<service>.pem, -key.pem    a server certificate per service, naming the service's
                                   compose host name, localhost and 127.0.0.1 (the proxies'
                                   also name the load balancer, ``lb``)
    cluster-secret                 the internal plane's secret (YAK_CLUSTER_SECRET_FILE)
    credentials.json               the super-user ``admin`` and its API key (created in etcd
                                   through the bootstrap path of ``yak users create``)
    console-api-key                that key alone, for the console's sampler

Run with the Yak image's Python: ``python secure_init.py /var/lib/yak/secrets``; it reads
``YAK_ETCD`` and ``YAK_CLUSTER_ID``. Run again, it keeps the CA, the secret and the key.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from yak.cli.secure import bootstrap_admin
from yak.security.cluster_secret import new_cluster_secret
from yak.security.local_ca import LocalCa, write_private

SERVICES = (
    "coordinator-0",
    "coordinator-1",
    "broker-0",
    "broker-1",
    "broker-2",
    "rest-proxy-0",
    "rest-proxy-1",
    "console",
)


def hosts_of(service: str) -> tuple[str, ...]:
    """The names a service's certificate is valid for."""
    extra = ("lb",) if service.startswith("rest-proxy") else ()
    return (service, *extra, "localhost", "127.0.0.1")


def main(secrets: Path) -> None:
    ca = LocalCa.load_or_create(secrets / "tls")
    for service in SERVICES:
        ca.issue(service, hosts=hosts_of(service))
    secret = secrets / "cluster-secret"
    if not secret.exists():
        write_private(secret, new_cluster_secret().encode())
    etcd = os.environ.get("YAK_ETCD", "http://etcd:2379")
    token = bootstrap_admin(secrets, etcd, os.environ.get("YAK_CLUSTER_ID", "compose"))
    write_private(secrets / "console-api-key", token.encode())
    print(f"certificates, cluster secret and the admin's key are in {secrets}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/var/lib/yak/secrets"))
