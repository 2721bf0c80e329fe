"""The schema registry's settings: one frozen value, from CLI flags and ``YAK_*`` environment.

``yak up`` passes ``--host``/``--port`` and ``YAK_ETCD``, ``YAK_CLUSTER_ID``; the registry
keeps its schemas under that cluster's ``/yak/<cluster-id>/schemas/`` keys, so every registry
instance of one cluster serves the same schemas.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from yak.metadata.etcd_endpoints import parse_etcd_urls
from yak.metadata.keyspace import validate_cluster_id

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
        return cls(port=port, **{k: str(v) for k, v in values.items()})
