"""The schema registry's settings: one frozen value, from CLI flags and ``YAK_*`` environment.

``yak up`` passes ``--host``/``--port`` and ``YAK_ETCD``, ``YAK_CLUSTER_ID``; the registry
keeps its schemas under that cluster's ``/yak/<cluster-id>/schemas/`` keys, so every registry
instance of one cluster serves the same schemas. ``YAK_SECURITY=on`` turns on the cluster's
authentication and ACLs (``api.security``), ``YAK_SUPER_USERS`` names the principals that pass
every ACL; etcd's credentials and TLS come from ``YAK_ETCD_*`` (``yak.metadata.etcd_store``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from yak.metadata.etcd_endpoints import parse_etcd_urls
from yak.metadata.keyspace import validate_cluster_id
from yak.security.switches import principal_list, security_switch

__all__ = ["DEFAULT_PORT", "RegistrySettings"]

#: Confluent's registry listens on 8081; so does Yak's by default.
DEFAULT_PORT = 8081

_ENV = {
    "host": "YAK_HOST",
    "port": "YAK_PORT",
    "etcd_url": "YAK_ETCD",
    "cluster_id": "YAK_CLUSTER_ID",
}


@dataclass(frozen=True, slots=True)
class RegistrySettings:
    """Everything a registry process needs to know at start."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    etcd_url: str = "http://127.0.0.1:2379"
    cluster_id: str = "local"
    security: bool = False
    #: Principals that pass every ACL (``YAK_SUPER_USERS``: ``User:admin,User:ops``).
    super_users: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        parse_etcd_urls(self.etcd_url)  # a typo stops the start
        validate_cluster_id(self.cluster_id)
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0-65535, got {self.port}")

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, **overrides: object
    ) -> RegistrySettings:
        """Settings from ``YAK_*`` variables; ``overrides`` (e.g. CLI flags) win when not None."""
        env = os.environ if env is None else env
        values: dict[str, object] = {k: env[v] for k, v in _ENV.items() if v in env}
        values.update({k: v for k, v in overrides.items() if v is not None})
        port = int(str(values.pop("port", DEFAULT_PORT)))
        security = security_switch(env.get("YAK_SECURITY", "off"))
        super_users = principal_list(env.get("YAK_SUPER_USERS", ""))
        strings = {k: str(v) for k, v in values.items()}
        return cls(port=port, security=security, super_users=super_users, **strings)
