"""etcd users and roles for a secure cluster: each kind of service may touch only its keys.

etcd with authentication on refuses every call without a valid user (an anonymous client
reads and writes nothing), and a user may touch only the key ranges its roles grant. Yak's
services get one user each kind, named after it, with a role of the same name; every key range
is under the cluster's prefix ``/yak/<cluster-id>/`` (``yak.metadata.keyspace``):

==================  =========================================  ================================
user / role         may write (and read)                       may read
==================  =========================================  ================================
``yak-coordinator`` ``controller``, ``topics/``,               the whole cluster prefix
                    ``partitions/``, ``broker-records/``,      (``brokers/``, ``producers/``
                    ``decommissions/``, ``groups/``,           ...)
                    ``offsets/``, ``security/``
``yak-broker``      ``brokers/`` (its registration),           the whole cluster prefix
                    ``partitions/`` (ISR changes), and for its
                    Kafka listener ``producers/``
                    (InitProducerId), ``groups/`` and
                    ``offsets/`` (classic groups, commits)
``yak-rest-proxy``  ``groups/``, ``offsets/``, ``producers/``  the whole cluster prefix
``yak-schema-       ``schemas/``                               ``security/`` (users, keys and
registry``                                                     ACLs it authenticates with)
``root``            everything (etcd's own super-user: user and role setup, ``yak users
                    create --bootstrap``)
==================  =========================================  ================================

No proxy writes ``security/`` (principals, ACLs, quotas), partition state, topics or the
controller key: a compromised proxy cannot make itself a super-user. The proxies serve the
security admin API (``/api/v1/security``) but send its changes to the coordinator
(``/admin/v1/security``), which writes them with its own user, as Kafka's REST proxy sends
CreateAcls and AlterUserScramCredentials to the controller; the coordinator holds the
controller key already, so writing ``security/`` gives it nothing it could not take.
``proxy_writes_security=True`` gives the proxy back ``security/`` (the layout before the
coordinator served those writes; kept for a deployment that still runs older proxies).
Every service reads the whole prefix because each follows it with one prefix watch (the
metadata cache), and etcd checks a range against the union of the ranges granted.

``setup_commands`` is the whole setup as ``etcdctl`` steps (``yak up --secure`` runs
them; a deployment can run the same ones), ``apply`` runs them against a running etcd. They are
idempotent: run again, they add what is missing and keep what is there, so a restart with the
same password files changes nothing. Passwords are 256 random bits, one file each (mode 0600).
"""

from __future__ import annotations

import os
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from yak.metadata.keyspace import Keyspace
from yak.security.private_file import write_private

__all__ = [
    "ROOT_USER",
    "EtcdRole",
    "apply",
    "ensure_passwords",
    "service_roles",
    "service_user",
    "setup_commands",
]

ROOT_USER = "root"
#: Service kinds that talk to etcd (the console talks to the rest-proxy only).
_KINDS = ("coordinator", "broker", "rest-proxy", "schema-registry")


@dataclass(frozen=True, slots=True)
class EtcdRole:
    """One etcd user and its role (same name): prefixes it may write, and read."""

    name: str
    write: tuple[str, ...]
    read: tuple[str, ...]


def service_user(process_name: str) -> str | None:
    """The etcd user of a ``yak up`` process (``broker-2`` is ``yak-broker``; None for a
    process that does not talk to etcd)."""
    for kind in _KINDS:
        if process_name == kind or process_name.startswith(f"{kind}-"):
            return f"yak-{kind}"
    return None


def service_roles(
    keyspace: Keyspace, *, proxy_writes_security: bool = False
) -> tuple[EtcdRole, ...]:
    """The roles of the module doc, for ``keyspace``'s cluster."""
    ks = keyspace
    everything = (ks.root,)
    security = (ks.security_prefix,) if proxy_writes_security else ()
    return (
        EtcdRole(
            "yak-coordinator",
            write=(
                ks.controller,
                ks.topics_prefix,
                ks.partitions_prefix,
                ks.broker_records_prefix,
                ks.decommissions_prefix,
                ks.groups_prefix,
                ks.offsets_prefix,
                ks.security_prefix,
            ),
            read=everything,
        ),
        EtcdRole(
            "yak-broker",
            write=(
                ks.brokers_prefix,
                ks.partitions_prefix,
                f"{ks.root}producers/",
                ks.groups_prefix,
                ks.offsets_prefix,
            ),
            read=everything,
        ),
        EtcdRole(
            "yak-rest-proxy",
            write=(ks.groups_prefix, ks.offsets_prefix, f"{ks.root}producers/", *security),
            read=everything,
        ),
        # The registry follows no cluster state: its schemas, and security/ to authenticate.
        EtcdRole("yak-schema-registry", write=(f"{ks.root}schemas/",), read=(ks.security_prefix,)),
    )


def _range(key: str) -> list[str]:
    """etcdctl's arguments for ``key``: a prefix when it ends with ``/``, else the key."""
    return [key, "--prefix"] if key.endswith("/") else [key]


#: One etcdctl step: its arguments (after the connection flags), and what it reads on stdin.
Step = tuple[list[str], str]


def setup_commands(
    keyspace: Keyspace, passwords: dict[str, str], *, proxy_writes_security: bool = False
) -> list[Step]:
    """The ``etcdctl`` steps that create root, every role, every user with its password from
    ``passwords`` (by user name; read from stdin, never on a command line), and turn
    authentication on."""
    steps: list[Step] = [
        (["user", "add", ROOT_USER, "--interactive=false"], passwords[ROOT_USER]),
        (["user", "grant-role", ROOT_USER, "root"], ""),
    ]
    for role in service_roles(keyspace, proxy_writes_security=proxy_writes_security):
        steps.append((["role", "add", role.name], ""))
        for key in role.read:
            steps.append((["role", "grant-permission", role.name, "read", *_range(key)], ""))
        for key in role.write:
            steps.append((["role", "grant-permission", role.name, "readwrite", *_range(key)], ""))
        password = passwords[role.name]
        steps.append((["user", "add", role.name, "--interactive=false"], password))
        # The password of the file, also for a user made before (its file was lost).
        steps.append((["user", "passwd", role.name, "--interactive=false"], password))
        steps.append((["user", "grant-role", role.name, role.name], ""))
    steps.append((["auth", "enable"], ""))
    return steps


def ensure_passwords(folder: Path) -> dict[str, str]:
    """Every user's password, from ``<folder>/<user>.password`` (0600), made when missing."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    passwords = {}
    for user in (ROOT_USER, *(f"yak-{kind}" for kind in _KINDS)):
        path = folder / f"{user}.password"
        if not path.exists():
            write_private(path, secrets.token_urlsafe(32).encode())
        passwords[user] = path.read_text().strip()
    return passwords


#: etcdctl's answers to a step already done: the command changed nothing, go on.
_DONE = (
    "already exists",
    "already granted",
    "authentication is already enabled",
    "permission is not granted",  # a revoke of what was never granted
)


def apply(
    etcdctl: Path,
    endpoint: str,
    ca_file: Path,
    keyspace: Keyspace,
    passwords: dict[str, str],
    *,
    proxy_writes_security: bool = False,
) -> None:
    """Run ``setup_commands`` against ``endpoint`` (as root once authentication is on).

    A fresh etcd has no users and authentication off; a restarted one has both, and then
    every step runs as root and only adds what is missing. A step that fails for any other
    reason raises ``RuntimeError`` with etcdctl's message."""
    base = [str(etcdctl), f"--endpoints={endpoint}", f"--cacert={ca_file}"]
    # etcdctl reads its flags from ETCDCTL_*: the root password stays off the command line.
    as_root = {**os.environ, "ETCDCTL_USER": ROOT_USER, "ETCDCTL_PASSWORD": passwords[ROOT_USER]}
    plain = {k: v for k, v in os.environ.items() if not k.startswith("ETCDCTL_")}
    probe = _etcdctl([*base, "user", "list"], "", as_root)
    env = as_root if probe.returncode == 0 else plain
    steps = setup_commands(keyspace, passwords, proxy_writes_security=proxy_writes_security)
    if not proxy_writes_security:  # closing a range granted before: take it back
        steps.insert(-1, (_revoke_security(keyspace), ""))
    for command, stdin in steps:
        done = _etcdctl([*base, *command], stdin, env)
        if done.returncode != 0 and not any(words in done.stderr for words in _DONE):
            shown = " ".join(command[:3])
            raise RuntimeError(f"etcdctl {shown} failed at {endpoint}: {done.stderr.strip()}")


def _revoke_security(keyspace: Keyspace) -> list[str]:
    prefix = _range(keyspace.security_prefix)
    return ["role", "revoke-permission", "yak-rest-proxy", *prefix]


def _etcdctl(argv: list[str], stdin: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, input=stdin, capture_output=True, text=True, env=env, timeout=30, check=False
    )
