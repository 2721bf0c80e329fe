"""The coordinator's settings: one frozen value, from CLI flags and ``YAK_*`` environment.

``yak up`` passes ``--host``/``--port`` and ``YAK_ETCD``, ``YAK_CLUSTER_ID``, ``YAK_NODE_ID``,
``YAK_DATA_DIR``; the other settings have Kafka-like defaults documented on each field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from yak.metadata.etcd_endpoints import parse_etcd_urls
from yak.metadata.keyspace import validate_cluster_id, validate_member_id
from yak.security.acl import user_name
from yak.security.cluster_secret import load_cluster_secret
from yak.security.switches import principal_list, security_switch

__all__ = ["CoordinatorSettings"]


@dataclass(frozen=True, slots=True)
class CoordinatorSettings:
    """Everything a coordinator process needs to know at start."""

    #: This coordinator's id (``YAK_NODE_ID``); shown as the controller's id.
    node_id: str = "0"
    host: str = "127.0.0.1"
    port: int = 9090
    #: The address other processes reach this one at (defaults to ``host``).
    advertised_host: str | None = None
    etcd_url: str = "http://127.0.0.1:2379"
    cluster_id: str = "local"
    data_dir: str | None = None
    #: Election lease TTL: a killed controller is replaced within about this many seconds.
    lease_ttl_s: int = 5
    #: Replication factor of topics created without one (Kafka's default.replication.factor).
    default_replication_factor: int = 1
    #: Move leadership back to the preferred replica (Kafka's auto.leader.rebalance.enable;
    #: ``YAK_AUTO_LEADER_REBALANCE``). Off: only ``yak partitions elect-leaders`` does it.
    auto_leader_rebalance: bool = True
    #: Reassignments a broker decommission keeps running at once, cluster-wide
    #: (``YAK_DECOMMISSION_MAX_MOVES``).
    decommission_max_moves: int = 10
    #: How long an admin write waits for the controller to finish its work before answering.
    admin_wait_s: float = 10.0
    #: A full reconcile pass runs at least this often: a safety net, since a round runs after
    #: every metadata change and decides for what it touched.
    resync_interval_s: float = 60.0
    #: The listener speaks TLS (``YAK_TLS_CERT``): the controller record says ``https``.
    tls: bool = False
    #: Callers must send it (``YAK_CLUSTER_SECRET[_FILE]``); None: the API is open.
    cluster_secret: str | None = field(default=None, repr=False)

    #: Admin API callers need a user's credential and ACLs (``YAK_SECURITY=on``).
    security: bool = False
    #: Principals that bypass ACLs (``YAK_SUPER_USERS``: ``User:admin,User:ops``).
    super_users: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        parse_etcd_urls(self.etcd_url)  # one member or several: a typo stops the start
        validate_cluster_id(self.cluster_id)
        validate_member_id(self.node_id)
        if self.lease_ttl_s < 1:
            raise ValueError(f"lease TTL must be at least 1 s, got {self.lease_ttl_s}")
        if self.default_replication_factor < 1:
            raise ValueError("the default replication factor must be at least 1")
        if self.decommission_max_moves < 1:
            raise ValueError("YAK_DECOMMISSION_MAX_MOVES must be at least 1")

    @property
    def url(self) -> str:
        """Where this coordinator's HTTP API is reached."""
        return f"{self.scheme}://{self.public_host}:{self.port}"

    @property
    def scheme(self) -> Literal["http", "https"]:
        return "https" if self.tls else "http"

    @property
    def public_host(self) -> str:
        if self.advertised_host:
            return self.advertised_host
        return "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, **overrides: object
    ) -> CoordinatorSettings:
        """Settings from ``YAK_*`` variables; ``overrides`` (e.g. CLI flags) win when not None."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        for name, variable in _ENV.items():
            if variable in env:
                values[name] = env[variable]
        values["tls"] = bool(env.get("YAK_TLS_CERT"))
        values["cluster_secret"] = load_cluster_secret(env)
        values.update(_security(env))
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**_typed(values))


_ENV = {
    "node_id": "YAK_NODE_ID",
    "host": "YAK_HOST",
    "port": "YAK_PORT",
    "advertised_host": "YAK_ADVERTISED_HOST",
    "etcd_url": "YAK_ETCD",
    "cluster_id": "YAK_CLUSTER_ID",
    "data_dir": "YAK_DATA_DIR",
    "lease_ttl_s": "YAK_LEASE_TTL_S",
    "default_replication_factor": "YAK_DEFAULT_REPLICATION_FACTOR",
    "auto_leader_rebalance": "YAK_AUTO_LEADER_REBALANCE",
    "decommission_max_moves": "YAK_DECOMMISSION_MAX_MOVES",
}
_INTS = {"port", "lease_ttl_s", "default_replication_factor", "decommission_max_moves"}
_BOOLS = {"auto_leader_rebalance"}


def _security(env: Mapping[str, str]) -> dict[str, object]:
    values: dict[str, object] = {}
    if env.get("YAK_SECURITY", "").strip():
        values["security"] = security_switch(env["YAK_SECURITY"])
    if env.get("YAK_SUPER_USERS"):
        users = principal_list(env["YAK_SUPER_USERS"])
        for user in users:
            user_name(user)  # ValueError for anything but User:<name>
        values["super_users"] = users
    return values


def _bool(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("on", "off", "true", "false", "1", "0"):
        raise ValueError(f"{_ENV[name]} must be true or false, not {value!r}")
    return text in ("on", "true", "1")


def _typed(values: dict[str, object]) -> dict[str, Any]:
    typed: dict[str, Any] = {}
    for k, v in values.items():
        typed[k] = int(str(v)) if k in _INTS else _bool(k, v) if k in _BOOLS else v
    return typed
