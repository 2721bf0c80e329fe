"""The rest-proxy's settings: one frozen value, from CLI flags and ``YAK_*`` environment.

``yak up`` passes ``--host``/``--port`` and ``YAK_ETCD``, ``YAK_CLUSTER_ID``, ``YAK_NODE_ID``.

==================================  ==========================  ================================
setting                             environment                 default
==================================  ==========================  ================================
host / port                         YAK_HOST / YAK_PORT         127.0.0.1 / 8082
etcd_url                            YAK_ETCD                    http://127.0.0.1:2379
cluster_id                          YAK_CLUSTER_ID              local
node_id                             YAK_NODE_ID                 0 (in generated instance names)
advertised_url                      YAK_ADVERTISED_URL          http://host:port (``base_uri``)
linger_ms                           YAK_LINGER_MS               2: the longest records wait
                                                                for company behind a round in
                                                                flight (idle: sent at once)
max_in_flight                       YAK_MAX_IN_FLIGHT           1: produce requests under way
                                                                to one broker at once
batch_max_bytes                     YAK_BATCH_MAX_BYTES         1 MiB (and never over the
                                                                topic's max.message.bytes)
compression                         YAK_COMPRESSION             none (gzip, snappy, lz4, zstd)
acks                                YAK_ACKS                    -1 (all in-sync replicas)
partitioner                         YAK_PARTITIONER             sticky: keyless records' partition
                                                                (``round_robin``, ``load_aware``:
                                                                away from loaded leaders); a
                                                                native produce may name its own
produce_timeout_ms                  —                           30000 (delivery timeout)
max_request_bytes                   YAK_MAX_REQUEST_BYTES       64 MiB (larger bodies: 413)
max_records_per_request             YAK_MAX_RECORDS_PER_        10000 (more records in one
                                    REQUEST                     produce request: 413)
request_read_timeout_ms             YAK_REQUEST_READ_TIMEOUT_   30000: longest wait for the next
                                    MS                          piece of a body (then 408), and
                                                                the keep-alive idle timeout
quota_produce_bytes_per_s           YAK_QUOTA_PRODUCE_BYTES_    0 (unlimited): each principal's
                                    PER_S                       produce rate on this proxy
quota_fetch_bytes_per_s             YAK_QUOTA_FETCH_BYTES_      0 (unlimited): each principal's
                                    PER_S                       fetch rate on this proxy
max_consumers_per_principal         YAK_MAX_CONSUMERS_PER_      1000 consumer instances/members
                                    PRINCIPAL                   per principal (security on)
consumer_instance_timeout_ms        YAK_CONSUMER_INSTANCE_      300000: an idle consumer
                                    TIMEOUT_MS                  instance is removed
consumer_request_timeout_ms         —                           1000: wait of a records GET
                                                                when the instance sets none
consumer_request_max_timeout_ms     YAK_CONSUMER_REQUEST_       30000: the longest wait a
                                    MAX_TIMEOUT_MS              records GET may ask for
consumer_request_max_bytes          —                           64 MiB
consumer_positions_flush_ms         YAK_CONSUMER_POSITIONS_     1000: how often the fetch
                                    FLUSH_MS                    positions a proxy holds in
                                                                memory are written to etcd (0:
                                                                at every poll); a proxy crash
                                                                re-delivers at most what was
                                                                polled since
consumer_handoff_timeout_ms         YAK_CONSUMER_HANDOFF_       2000: how long a proxy waits for
                                    TIMEOUT_MS                  the proxy holding an instance to
                                                                hand it over before taking it
                                                                (docs/consumer-groups.md)
security                            YAK_SECURITY                off; ``on``: every route but
                                                                the health checks and the
                                                                OpenAPI docs needs a credential
                                                                and an ACL (docs/security.md)
super_users                         YAK_SUPER_USERS             none; comma list of
                                                                ``User:<name>`` that bypass ACLs
auth_max_failures                   YAK_AUTH_MAX_FAILURES       10 failed checks of one user's
                                                                password or one API key (0: no
                                                                limit) within
auth_failure_window_s               YAK_AUTH_FAILURE_WINDOW_S   60 s: then 429 until the window
                                                                passes
cors_origins                        YAK_CORS_ORIGINS            none (CORS off); comma list of
                                                                origins, or ``*`` (``http.cors``)
cors_methods / cors_headers         YAK_CORS_METHODS /          GET, POST, PUT, DELETE / Accept,
                                    YAK_CORS_HEADERS            Authorization, Content-Type,
                                                                Idempotency-Key (``*``: any)
cors_expose_headers                 YAK_CORS_EXPOSE_HEADERS     the RateLimit ones, Retry-After,
                                                                X-Request-Id, Idempotent-Replayed
cors_credentials                    YAK_CORS_CREDENTIALS        off (refused with origins ``*``)
cors_max_age_s                      YAK_CORS_MAX_AGE_S          600: how long a browser keeps a
                                                                preflight's answer
idempotency_window_s                YAK_IDEMPOTENCY_WINDOW_S    86400: how long a produce's
                                                                answer is kept for a retry with
                                                                its ``Idempotency-Key`` (0: the
                                                                header is ignored)
ratelimit_headers                   YAK_RATELIMIT_HEADERS       on: ``RateLimit-*`` headers on
                                                                answers a quota applies to
schema_registry_url                 YAK_SCHEMA_REGISTRY_URL     none: the avro, jsonschema and
                                                                protobuf formats answer 415
                                                                (``schemas``); ``yak up
                                                                --schema-registry`` sets it
==================================  ==========================  ================================
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from yak.metadata.etcd_endpoints import parse_etcd_urls
from yak.metadata.keyspace import validate_cluster_id, validate_member_id
from yak.partitioner import PARTITIONERS, PartitionerName
from yak.record import CompressionType
from yak.security.acl import user_name
from yak.security.switches import principal_list, security_switch

__all__ = ["CORS_ALLOW_HEADERS", "CORS_ALLOW_METHODS", "CORS_EXPOSE_HEADERS", "ProxySettings"]

CORS_ALLOW_METHODS = ("GET", "POST", "PUT", "DELETE")
CORS_ALLOW_HEADERS = ("Accept", "Authorization", "Content-Type", "Idempotency-Key")
#: What a page may read of an answer beyond the CORS-safelisted headers.
CORS_EXPOSE_HEADERS = (
    "RateLimit-Limit",
    "RateLimit-Remaining",
    "RateLimit-Reset",
    "RateLimit-Policy",
    "Retry-After",
    "X-Request-Id",
    "Idempotent-Replayed",
)


@dataclass(frozen=True, slots=True)
class ProxySettings:
    """Everything a rest-proxy process needs to know at start."""

    host: str = "127.0.0.1"
    port: int = 8082
    etcd_url: str = "http://127.0.0.1:2379"
    cluster_id: str = "local"
    node_id: str = "0"
    advertised_url: str | None = None
    linger_ms: float = 2.0
    max_in_flight: int = 1
    batch_max_bytes: int = 1024 * 1024
    compression: CompressionType = CompressionType.NONE
    acks: int = -1
    partitioner: PartitionerName = "sticky"
    produce_timeout_ms: int = 30_000
    max_request_bytes: int = 64 * 1024 * 1024
    max_records_per_request: int = 10_000
    request_read_timeout_ms: int = 30_000
    quota_produce_bytes_per_s: int = 0
    quota_fetch_bytes_per_s: int = 0
    max_consumers_per_principal: int = 1_000
    consumer_instance_timeout_ms: int = 300_000
    consumer_request_timeout_ms: int = 1_000
    consumer_request_max_timeout_ms: int = 30_000
    consumer_request_max_bytes: int = 64 * 1024 * 1024
    consumer_positions_flush_ms: int = 1_000
    consumer_handoff_timeout_ms: int = 2_000
    security: bool = False
    super_users: tuple[str, ...] = ()
    auth_max_failures: int = 10
    auth_failure_window_s: float = 60.0
    cors_origins: tuple[str, ...] = ()
    cors_methods: tuple[str, ...] = CORS_ALLOW_METHODS
    cors_headers: tuple[str, ...] = CORS_ALLOW_HEADERS
    cors_expose_headers: tuple[str, ...] = CORS_EXPOSE_HEADERS
    cors_credentials: bool = False
    cors_max_age_s: int = 600
    idempotency_window_s: int = 24 * 3600
    ratelimit_headers: bool = True
    schema_registry_url: str | None = None
    #: The listener speaks TLS (``YAK_TLS_CERT`` is set): ``base_url`` is ``https://``.
    tls: bool = False

    def __post_init__(self) -> None:
        parse_etcd_urls(self.etcd_url)  # one member or several: a typo stops the start
        validate_cluster_id(self.cluster_id)
        validate_member_id(self.node_id)
        if self.acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1, 0 or 1, got {self.acks}")
        if self.linger_ms < 0:
            raise ValueError("linger_ms must be >= 0")
        if self.partitioner not in PARTITIONERS:
            raise ValueError(
                f"unknown partitioner {self.partitioner!r}; use one of {', '.join(PARTITIONERS)}"
            )
        if self.max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        if self.consumer_instance_timeout_ms < 1_000:
            raise ValueError("consumer_instance_timeout_ms must be at least 1000")
        for name in ("max_records_per_request", "request_read_timeout_ms"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        for name in ("consumer_positions_flush_ms", "consumer_handoff_timeout_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        for name in ("quota_produce_bytes_per_s", "quota_fetch_bytes_per_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (0: unlimited)")
        if self.auth_max_failures < 0 or self.auth_failure_window_s <= 0:
            raise ValueError("need auth_max_failures >= 0 and auth_failure_window_s > 0")
        for principal in self.super_users:
            user_name(principal)
        if self.idempotency_window_s < 0:
            raise ValueError("idempotency_window_s must be >= 0 (0: Idempotency-Key ignored)")

    @property
    def base_url(self) -> str:
        """Where clients reach this proxy (consumer ``base_uri`` values start with it)."""
        if self.advertised_url:
            return self.advertised_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> ProxySettings:
        """Settings from ``YAK_*`` variables (``os.environ`` by default), then ``overrides``."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        for name, variable, parse in _ENV:
            if env.get(variable):
                values[name] = parse(env[variable])
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]


def _compression(name: str) -> CompressionType:
    try:
        return CompressionType[name.upper()]
    except KeyError:
        choices = ", ".join(c.name.lower() for c in CompressionType)
        raise ValueError(f"unknown compression {name!r}; use one of {choices}") from None


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _switch(variable: str) -> Callable[[str], bool]:
    def parse(text: str) -> bool:
        value = text.strip().lower()
        if value not in ("on", "true", "1", "off", "false", "0"):
            raise ValueError(f"{variable} must be on or off, not {text!r}")
        return value in ("on", "true", "1")

    return parse


_ENV: tuple[tuple[str, str, Callable[[str], object]], ...] = (
    ("host", "YAK_HOST", str),
    ("port", "YAK_PORT", int),
    ("etcd_url", "YAK_ETCD", str),
    ("cluster_id", "YAK_CLUSTER_ID", str),
    ("node_id", "YAK_NODE_ID", str),
    ("advertised_url", "YAK_ADVERTISED_URL", str),
    ("linger_ms", "YAK_LINGER_MS", float),
    ("max_in_flight", "YAK_MAX_IN_FLIGHT", int),
    ("batch_max_bytes", "YAK_BATCH_MAX_BYTES", int),
    ("compression", "YAK_COMPRESSION", _compression),
    ("acks", "YAK_ACKS", int),
    ("partitioner", "YAK_PARTITIONER", str),
    ("max_request_bytes", "YAK_MAX_REQUEST_BYTES", int),
    ("max_records_per_request", "YAK_MAX_RECORDS_PER_REQUEST", int),
    ("request_read_timeout_ms", "YAK_REQUEST_READ_TIMEOUT_MS", int),
    ("quota_produce_bytes_per_s", "YAK_QUOTA_PRODUCE_BYTES_PER_S", int),
    ("quota_fetch_bytes_per_s", "YAK_QUOTA_FETCH_BYTES_PER_S", int),
    ("max_consumers_per_principal", "YAK_MAX_CONSUMERS_PER_PRINCIPAL", int),
    ("consumer_instance_timeout_ms", "YAK_CONSUMER_INSTANCE_TIMEOUT_MS", int),
    ("consumer_request_max_timeout_ms", "YAK_CONSUMER_REQUEST_MAX_TIMEOUT_MS", int),
    ("consumer_positions_flush_ms", "YAK_CONSUMER_POSITIONS_FLUSH_MS", int),
    ("consumer_handoff_timeout_ms", "YAK_CONSUMER_HANDOFF_TIMEOUT_MS", int),
    ("security", "YAK_SECURITY", security_switch),
    ("super_users", "YAK_SUPER_USERS", principal_list),
    ("auth_max_failures", "YAK_AUTH_MAX_FAILURES", int),
    ("auth_failure_window_s", "YAK_AUTH_FAILURE_WINDOW_S", float),
    ("cors_origins", "YAK_CORS_ORIGINS", _names),
    ("cors_methods", "YAK_CORS_METHODS", _names),
    ("cors_headers", "YAK_CORS_HEADERS", _names),
    ("cors_expose_headers", "YAK_CORS_EXPOSE_HEADERS", _names),
    ("cors_credentials", "YAK_CORS_CREDENTIALS", _switch("YAK_CORS_CREDENTIALS")),
    ("cors_max_age_s", "YAK_CORS_MAX_AGE_S", int),
    ("idempotency_window_s", "YAK_IDEMPOTENCY_WINDOW_S", int),
    ("ratelimit_headers", "YAK_RATELIMIT_HEADERS", _switch("YAK_RATELIMIT_HEADERS")),
    ("schema_registry_url", "YAK_SCHEMA_REGISTRY_URL", str),
    ("tls", "YAK_TLS_CERT", bool),
)
