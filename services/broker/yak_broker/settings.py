"""The broker's settings: one frozen value built from CLI flags and ``YAK_*`` environment.

Precedence: a CLI flag, then its environment variable, then the default below (``main.py``
declares the flags; ``BrokerSettings.from_env`` reads the environment alone, for tests and
embedding). ``yak up`` sets ``YAK_ETCD``, ``YAK_CLUSTER_ID``, ``YAK_NODE_ID`` (the broker id)
and ``YAK_DATA_DIR`` for each broker.

==========================  =====================  ==========================================
setting                     environment            default
==========================  =====================  ==========================================
broker_id                   YAK_NODE_ID            0
host / port                 YAK_HOST / YAK_PORT    127.0.0.1 / 9092
data_port                   YAK_DATA_PORT          0 (any free port): the internal listener
                                                   (Kafka framing), advertised in etcd
advertised_host             YAK_ADVERTISED_HOST    ``host`` (127.0.0.1 for 0.0.0.0): the
                                                   address registered for other processes
kafka_port                  YAK_KAFKA_PORT         0 (any free port): the public Kafka
                                                   listener (``yak_broker.kafka``); -1: none
kafka_advertised_host       YAK_KAFKA_ADVERTISED_  the registered host (above): where Kafka
                            HOST                   clients are told to connect
kafka_advertised_port       YAK_KAFKA_ADVERTISED_  the bound Kafka port (a container's
                            PORT                   published port differs)
kafka_security_protocol     YAK_KAFKA_SECURITY_    PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL;
                            PROTOCOL               default: SASL_ when security is on or a
                                                   cluster secret is set, then SSL with TLS,
                                                   else PLAINTEXT. SSL needs TLS; under
                                                   security or a secret only SASL_* may open
                                                   (docs/kafka-protocol.md, Security)
security                    YAK_SECURITY           off; ``on`` (as the rest-proxy's): the
                                                   Kafka listener must authenticate (SASL)
super_users                 YAK_SUPER_USERS        none; ``User:<name>`` list bypassing ACLs
quota_produce_bytes_per_s   YAK_QUOTA_PRODUCE_     0 (unlimited): each principal's produce
                            BYTES_PER_S            byte rate on this broker's Kafka listener,
quota_fetch_bytes_per_s     YAK_QUOTA_FETCH_       and fetch byte rate, unless its override
                            BYTES_PER_S            in etcd says otherwise (as the proxy's)
data_dir                    YAK_DATA_DIR           ./.yak-broker
etcd_url                    YAK_ETCD               http://127.0.0.1:2379 (or several members,
                                                   comma-separated: failover)
cluster_id                  YAK_CLUSTER_ID         local
rack                        YAK_RACK               none
lease_ttl_s                 YAK_LEASE_TTL_S        6 (etcd's minimum is about 2)
registration_timeout_s      —                      lease TTL + 5: how long to wait for an
                                                   older registration of this id to expire
max_request_bytes           —                      64 MiB (larger produce bodies get 413)
max_wait_ms_limit           —                      30000 (a fetch's max wait is capped here)
replica_lag_time_max_ms     YAK_REPLICA_LAG_       30000: a follower not caught up for this
                            TIME_MAX_MS            long leaves the ISR (Kafka's default)
replica_fetch_wait_max_ms   —                      500: a follower's long-poll max wait
replica_fetch_backoff_ms    —                      1000: pause after a failed follower fetch
controlled_shutdown_        YAK_CONTROLLED_        10: on SIGTERM, how long to wait for the
timeout_s                   SHUTDOWN_TIMEOUT_S     controller to move leaderships away
controlled_shutdown_        —                      0.5: then how long the broker goes on
linger_s                                           answering (NOT_LEADER_OR_FOLLOWER) before
                                                   its listeners close
tls                         YAK_TLS_CERT set       off: the listener speaks TLS (``yak.web.tls``)
cluster_secret              YAK_CLUSTER_SECRET     none: every route but the health checks
                            [_FILE]                needs it (``yak.web.cluster_secret``)
max_open_files              YAK_MAX_OPEN_FILES     half the soft RLIMIT_NOFILE (after the
                                                   raise to the hard limit), 64..4096: the
                                                   segment and index files kept open at
                                                   once (``storage.file_handles``)
metrics_partition_series    YAK_METRICS_PARTITION_ 1000: per-partition gauges on /metrics while
                            SERIES                 the broker hosts at most this many replicas;
                                                   per-topic ones always (``metrics``)
load_publish_interval_ms    YAK_LOAD_PUBLISH_      5000 (1000..60000): how often the broker
                            INTERVAL_MS            samples its load; it rewrites its
                                                   registration with the sample at most this
                                                   often (``server.load_sampler``)
group_initial_rebalance_   YAK_GROUP_INITIAL_     3000 (Kafka's default): an empty classic
delay_ms                    REBALANCE_DELAY_MS     group's first rebalance waits this long for
                                                   more members; ``yak up`` sets 0, as Kafka's
                                                   shipped server.properties does
kafka_fetch_session_cache_  YAK_KAFKA_FETCH_       1000 (Kafka's max.incremental.fetch.
slots                       SESSION_CACHE_SLOTS    session.cache.slots): consumer fetch
                                                   sessions the Kafka listener holds; 0: none
==========================  =====================  ==========================================
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from yak.metadata.etcd_endpoints import parse_etcd_urls
from yak.security.cluster_secret import load_cluster_secret
from yak.security.switches import principal_list, security_switch

__all__ = [
    "LOAD_PUBLISH_INTERVAL_MAX_MS",
    "LOAD_PUBLISH_INTERVAL_MIN_MS",
    "BrokerSettings",
    "KafkaSecurityProtocol",
]

#: Bounds of ``load_publish_interval_ms``: below a second the registration rewrites would be
#: an etcd write storm; above a minute the samples say little of the present.
LOAD_PUBLISH_INTERVAL_MIN_MS = 1_000
LOAD_PUBLISH_INTERVAL_MAX_MS = 60_000


class KafkaSecurityProtocol(StrEnum):
    """Kafka's ``security.protocol`` of the Kafka listener."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def sasl(self) -> bool:
        return self.name.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.name.endswith("SSL")


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    """Everything a broker process needs to know at start."""

    broker_id: int = 0
    host: str = "127.0.0.1"
    port: int = 9092
    #: The internal listener's port (Kafka framing: produce, fetch, replication); 0: any free
    #: port, advertised in the registration.
    data_port: int = 0
    #: The address other processes reach this broker at (registered in etcd); default ``host``.
    advertised_host: str | None = None
    #: The public Kafka listener's port; 0: any free port; -1: no Kafka listener.
    kafka_port: int = 0
    #: The Kafka address advertised to clients (Metadata, the registration); None: the
    #: registered host and the bound port.
    kafka_advertised_host: str | None = None
    kafka_advertised_port: int | None = None
    #: The Kafka listener's security protocol; None: derived (``kafka_protocol``).
    kafka_security_protocol: KafkaSecurityProtocol | None = None
    #: Clients must authenticate (the Kafka listener: SASL only), as on the rest-proxy.
    security: bool = False
    #: Principals (``User:<name>``) that bypass the ACLs.
    super_users: tuple[str, ...] = ()
    #: Each principal's default byte rates on the Kafka listener (0: unlimited).
    quota_produce_bytes_per_s: int = 0
    quota_fetch_bytes_per_s: int = 0
    data_dir: Path = Path(".yak-broker")
    etcd_url: str = "http://127.0.0.1:2379"
    cluster_id: str = "local"
    rack: str | None = None
    lease_ttl_s: int = 6
    registration_timeout_s: float | None = None
    max_request_bytes: int = 64 * 1024 * 1024
    max_wait_ms_limit: int = 30_000
    flush_check_interval_ms: int = 1_000
    checkpoint_interval_ms: int = 60_000
    retention_check_interval_ms: int = 300_000
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_backoff_ms: int = 1_000
    controlled_shutdown_timeout_s: float = 10.0
    #: After its leaderships moved, how long the broker keeps answering (NOT_LEADER_OR_FOLLOWER)
    #: before its listeners close: clients mid-cycle learn the new leader from it.
    controlled_shutdown_linger_s: float = 0.5
    #: The listener speaks TLS (``YAK_TLS_CERT``): the registration says ``https``.
    tls: bool = False
    #: Callers must send it (``YAK_CLUSTER_SECRET[_FILE]``); None: the API is open.
    cluster_secret: str | None = field(default=None, repr=False)
    #: Segment and index files open at once; None: from the open-files limit at start.
    max_open_files: int | None = None
    #: Hosted replicas up to which /metrics has per-partition gauges (per topic always).
    metrics_partition_series: int = 1_000
    #: How often the load sample is taken and, at most, published (``server.load_sampler``).
    load_publish_interval_ms: int = 5_000
    #: ``group.initial.rebalance.delay.ms`` of the classic groups coordinated here.
    group_initial_rebalance_delay_ms: int = 3_000
    #: Consumer fetch sessions (KIP-227) the Kafka listener holds at most; 0: none.
    kafka_fetch_session_cache_slots: int = 1_000

    def __post_init__(self) -> None:
        parse_etcd_urls(self.etcd_url)  # one member or several: a typo stops the start
        if self.broker_id < 0:
            raise ValueError(f"broker id must be >= 0, got {self.broker_id}")
        if not -1 <= self.kafka_port <= 65535:
            raise ValueError(f"kafka port must be -1 (none), 0 (any) or a port: {self.kafka_port}")
        self._check_kafka_security()
        if self.lease_ttl_s < 1:
            raise ValueError(f"lease TTL must be >= 1 s, got {self.lease_ttl_s}")
        delay_ms = self.group_initial_rebalance_delay_ms
        if delay_ms < 0:
            raise ValueError(f"initial rebalance delay must be >= 0 ms, got {delay_ms}")
        if self.kafka_fetch_session_cache_slots < 0:
            slots = self.kafka_fetch_session_cache_slots
            raise ValueError(f"fetch session cache slots must be >= 0, got {slots}")
        if self.max_open_files is not None and self.max_open_files < 1:
            raise ValueError(f"max open files must be >= 1, got {self.max_open_files}")
        if self.metrics_partition_series < 0:
            raise ValueError(
                f"metrics partition series must be >= 0, got {self.metrics_partition_series}"
            )
        if (
            not LOAD_PUBLISH_INTERVAL_MIN_MS
            <= self.load_publish_interval_ms
            <= (LOAD_PUBLISH_INTERVAL_MAX_MS)
        ):
            raise ValueError(
                f"load publish interval must be {LOAD_PUBLISH_INTERVAL_MIN_MS}.."
                f"{LOAD_PUBLISH_INTERVAL_MAX_MS} ms, got {self.load_publish_interval_ms}"
            )

    def _check_kafka_security(self) -> None:
        protocol = self.kafka_protocol
        if protocol.tls and not self.tls:
            raise ValueError(f"the Kafka listener's {protocol} needs TLS (YAK_TLS_CERT)")
        if not protocol.sasl and (self.security or self.cluster_secret is not None):
            raise ValueError(
                f"the Kafka listener's {protocol} would let clients around the cluster's "
                "security: use SASL_SSL or SASL_PLAINTEXT"
            )
        if min(self.quota_produce_bytes_per_s, self.quota_fetch_bytes_per_s) < 0:
            raise ValueError("quotas must be >= 0 bytes per second (0: unlimited)")

    @property
    def kafka_protocol(self) -> KafkaSecurityProtocol:
        """The Kafka listener's security protocol (see the module docstring's table)."""
        if self.kafka_security_protocol is not None:
            return self.kafka_security_protocol
        sasl = "SASL_" if self.security or self.cluster_secret is not None else ""
        return KafkaSecurityProtocol(sasl + ("SSL" if self.tls else "PLAINTEXT"))

    @property
    def public_host(self) -> str:
        """The host registered in etcd: ``advertised_host``, else the bound ``host``."""
        if self.advertised_host:
            return self.advertised_host
        return "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host

    @property
    def registration_wait_s(self) -> float:
        """How long to wait for an older registration of this broker id to expire."""
        if self.registration_timeout_s is not None:
            return self.registration_timeout_s
        return self.lease_ttl_s + 5.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> BrokerSettings:
        """Settings from ``YAK_*`` variables (``os.environ`` by default), then ``overrides``."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        for name, variable, parse in _ENV:
            if env.get(variable):
                values[name] = parse(env[variable])
        values.setdefault("cluster_secret", load_cluster_secret(env))
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]


_ENV: tuple[tuple[str, str, Callable[[str], object]], ...] = (
    ("broker_id", "YAK_NODE_ID", int),
    ("host", "YAK_HOST", str),
    ("port", "YAK_PORT", int),
    ("data_port", "YAK_DATA_PORT", int),
    ("advertised_host", "YAK_ADVERTISED_HOST", str),
    ("kafka_port", "YAK_KAFKA_PORT", int),
    ("kafka_advertised_host", "YAK_KAFKA_ADVERTISED_HOST", str),
    ("kafka_advertised_port", "YAK_KAFKA_ADVERTISED_PORT", int),
    ("kafka_security_protocol", "YAK_KAFKA_SECURITY_PROTOCOL", KafkaSecurityProtocol),
    ("security", "YAK_SECURITY", security_switch),
    ("super_users", "YAK_SUPER_USERS", principal_list),
    ("quota_produce_bytes_per_s", "YAK_QUOTA_PRODUCE_BYTES_PER_S", int),
    ("quota_fetch_bytes_per_s", "YAK_QUOTA_FETCH_BYTES_PER_S", int),
    ("data_dir", "YAK_DATA_DIR", Path),
    ("etcd_url", "YAK_ETCD", str),
    ("cluster_id", "YAK_CLUSTER_ID", str),
    ("rack", "YAK_RACK", str),
    ("lease_ttl_s", "YAK_LEASE_TTL_S", int),
    ("replica_lag_time_max_ms", "YAK_REPLICA_LAG_TIME_MAX_MS", int),
    ("controlled_shutdown_timeout_s", "YAK_CONTROLLED_SHUTDOWN_TIMEOUT_S", float),
    ("tls", "YAK_TLS_CERT", bool),
    ("max_open_files", "YAK_MAX_OPEN_FILES", int),
    ("metrics_partition_series", "YAK_METRICS_PARTITION_SERIES", int),
    ("load_publish_interval_ms", "YAK_LOAD_PUBLISH_INTERVAL_MS", int),
    ("group_initial_rebalance_delay_ms", "YAK_GROUP_INITIAL_REBALANCE_DELAY_MS", int),
    ("kafka_fetch_session_cache_slots", "YAK_KAFKA_FETCH_SESSION_CACHE_SLOTS", int),
)
