"""A real cluster for fault tests and benchmarks: etcd, one coordinator, N brokers as processes.

Unlike ``yak up`` it exposes what fault drills need: each broker's pid, kill -9, SIGSTOP and
SIGCONT, and a restart on the same data folder, id and port; brokers and the coordinator run
with a short lease (``lease_ttl_s``, default 2 s, etcd's practical minimum) so failures are
noticed fast. ``IdempotentProducer`` writes one partition with acks=all, a producer id and
sequence numbers, and retries the *same* batch after any retriable error (a new leader, a
timeout, a dropped connection) — the broker's idempotence must turn those retries into
exactly-once appends. Used by ``tests/integration/test_replication_faults.py`` and
``loadtest/bench_replication.py``.

``python_path`` (empty by default: this checkout's code, through the venv's entry points) runs
the services on other code instead: its folders go first on each service's ``PYTHONPATH`` (e.g.
another checkout's ``shared`` and ``services/*``, see ``code_path``) and each service starts as
``python -c`` importing its package, printing ``code: <yak.__file__> <package.__file__>`` as the
first line of its log so a caller can check what ran (``loadtest/bench_latency.py`` measures an
older commit from a ``git worktree`` this way).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from yak.api.admin import TopicDescription
from yak.clients.admin import AdminClient
from yak.clients.broker import BrokerClient
from yak.errors import YakError
from yak.etcd_server import EmbeddedEtcd, free_ports
from yak.metadata.cache import MetadataCache
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import KeyKind, Keyspace, ParsedKey
from yak.record import RecordInput, encode_batch, iter_records
from yak.supervisor import ManagedProcess, ProcessSpec, StartupError, Supervisor

__all__ = [
    "Ack",
    "IdempotentProducer",
    "LocalCluster",
    "RegistrationWatch",
    "code_path",
    "local_cluster",
    "read_partition",
]

HOST = "127.0.0.1"
#: The folders of a checkout that hold its importable packages (``yak`` and the services).
CODE_FOLDERS = (
    "shared",
    "services/broker",
    "services/coordinator",
    "services/rest-proxy",
    "services/console",
)
#: How a service starts on ``python_path``: its package's ``main``, after saying where it is.
_LAUNCH = (
    "import sys, yak, {package}; "
    "print('code:', yak.__file__, {package}.__file__, flush=True); "
    "sys.argv[0] = {script!r}; "
    "from {package}.main import main; main()"
)


def code_path(checkout: Path) -> tuple[str, ...]:
    """The ``python_path`` that runs the services of ``checkout`` (a clone or a worktree)."""
    return tuple(str(checkout / folder) for folder in CODE_FOLDERS)


@dataclass
class LocalCluster:
    folder: Path
    etcd: EmbeddedEtcd
    cluster_id: str
    lease_ttl_s: int
    replica_lag_time_max_ms: int
    supervisor: Supervisor = field(default_factory=Supervisor)
    broker_ports: dict[int, int] = field(default_factory=dict)
    brokers: dict[int, ManagedProcess] = field(default_factory=dict)
    coordinator_url: str = ""
    #: Every coordinator started, by index (``coordinator_url`` is the first one's).
    coordinators: dict[int, ManagedProcess] = field(default_factory=dict)
    coordinator_urls: dict[int, str] = field(default_factory=dict)
    proxy_ports: dict[int, int] = field(default_factory=dict)
    proxies: dict[int, ManagedProcess] = field(default_factory=dict)
    console_port: int = 0
    console: ManagedProcess | None = None
    #: Folders first on the services' PYTHONPATH (see the module doc); empty: this checkout.
    python_path: tuple[str, ...] = ()
    #: Added to every broker's environment (its restarts too), e.g. ``yak up``'s settings.
    broker_env: dict[str, str] = field(default_factory=dict)

    def _command(self, script: str) -> tuple[str, ...]:
        """The argv start of service ``script`` (``yak-broker`` ...), on ``python_path``."""
        if not self.python_path:
            return (_script(script),)
        package = script.replace("-", "_")
        return (sys.executable, "-c", _LAUNCH.format(package=package, script=script))

    def _code_env(self) -> dict[str, str]:
        if not self.python_path:
            return {}
        return {"PYTHONPATH": os.pathsep.join(self.python_path)}

    def broker_url(self, broker_id: int) -> str:
        return f"http://{HOST}:{self.broker_ports[broker_id]}"

    def start_coordinator(self, index: int = 0, **env: str) -> None:
        """Start coordinator ``index`` (node id ``c<index>``; the first is named
        ``coordinator``, the others ``coordinator-<index>``); ``env`` adds ``YAK_*`` settings
        (e.g. ``YAK_SECURITY``)."""
        (port,) = free_ports(1)
        url = f"http://{HOST}:{port}"
        if index == 0:
            self.coordinator_url = url
        self.coordinator_urls[index] = url
        name = "coordinator" if index == 0 else f"coordinator-{index}"
        argv = (
            *self._command("yak-coordinator"),
            *("--host", HOST, "--port", str(port), "--etcd", self.etcd.endpoint),
            *("--cluster-id", self.cluster_id, "--node-id", f"c{index}"),
            *("--lease-ttl", str(self.lease_ttl_s), "--log-level", "warning"),
        )
        self.coordinators[index] = self.supervisor.start(
            ProcessSpec(
                name=name,
                argv=argv,
                log_path=self.folder / "logs" / f"{name}.log",
                health_url=f"{url}/readyz",
                url=url,
                env={**self._code_env(), **env},
            )
        )

    def kill_coordinator(self, index: int) -> None:
        process = self.coordinators[index]
        process.popen.send_signal(signal.SIGKILL)
        process.popen.wait()

    def start_broker(
        self, broker_id: int, *, ready_timeout_s: float = 30.0, **env: str
    ) -> ManagedProcess:
        """Start (or restart, on the same folder, id and port) broker ``broker_id``; wait at
        most ``ready_timeout_s`` for it to be ready (a restart on many logs loads them first);
        ``env`` adds ``YAK_*`` settings (e.g. a fixed ``YAK_DATA_PORT``)."""
        if broker_id not in self.broker_ports:
            (self.broker_ports[broker_id],) = free_ports(1)
        port = self.broker_ports[broker_id]
        process = self.supervisor.start(
            ProcessSpec(
                name=f"broker-{broker_id}",
                argv=(*self._command("yak-broker"), "--host", HOST, "--port", str(port)),
                log_path=self.folder / "logs" / f"broker-{broker_id}.log",
                health_url=f"http://{HOST}:{port}/readyz",
                url=f"http://{HOST}:{port}",
                ready_timeout_s=ready_timeout_s,
                env={
                    "YAK_ETCD": self.etcd.endpoint,
                    "YAK_CLUSTER_ID": self.cluster_id,
                    "YAK_NODE_ID": str(broker_id),
                    "YAK_DATA_DIR": str(self.folder / f"broker-{broker_id}"),
                    "YAK_LEASE_TTL_S": str(self.lease_ttl_s),
                    "YAK_REPLICA_LAG_TIME_MAX_MS": str(self.replica_lag_time_max_ms),
                    "YAK_LOG_LEVEL": "info",
                    **self._code_env(),
                    **self.broker_env,
                    **env,
                },
            )
        )
        self.brokers[broker_id] = process
        return process

    def proxy_url(self, index: int = 0) -> str:
        return f"http://{HOST}:{self.proxy_ports[index]}"

    def start_proxy(self, index: int = 0, **env: str) -> ManagedProcess:
        """Start (or restart, on the same port) rest-proxy ``index``; ``env`` adds ``YAK_*``
        settings (e.g. ``YAK_CONSUMER_INSTANCE_TIMEOUT_MS``)."""
        if index not in self.proxy_ports:
            (self.proxy_ports[index],) = free_ports(1)
        port = self.proxy_ports[index]
        process = self.supervisor.start(
            ProcessSpec(
                name=f"rest-proxy-{index}",
                argv=(*self._command("yak-rest-proxy"), "--host", HOST, "--port", str(port)),
                log_path=self.folder / "logs" / f"rest-proxy-{index}.log",
                health_url=f"http://{HOST}:{port}/readyz",
                url=f"http://{HOST}:{port}",
                env={
                    "YAK_ETCD": self.etcd.endpoint,
                    "YAK_CLUSTER_ID": self.cluster_id,
                    "YAK_NODE_ID": str(index),
                    "YAK_LOG_LEVEL": "info",
                    **self._code_env(),
                    **env,
                },
            )
        )
        self.proxies[index] = process
        return process

    def start_console(self, proxy_index: int = 0, **env: str) -> ManagedProcess:
        """Start the console against rest-proxy ``proxy_index``; ``env`` adds ``YAK_*``
        settings (e.g. ``YAK_CONSOLE_SAMPLE_INTERVAL_MS``)."""
        if not self.console_port:
            (self.console_port,) = free_ports(1)
        port = self.console_port
        self.console = self.supervisor.start(
            ProcessSpec(
                name="console",
                argv=(*self._command("yak-console"), "--host", HOST, "--port", str(port)),
                log_path=self.folder / "logs" / "console.log",
                health_url=f"http://{HOST}:{port}/healthz",
                url=f"http://{HOST}:{port}",
                env={
                    "YAK_API_URL": self.proxy_url(proxy_index),
                    "YAK_LOG_LEVEL": "info",
                    **self._code_env(),
                    **env,
                },
            )
        )
        return self.console

    @property
    def console_url(self) -> str:
        return f"http://{HOST}:{self.console_port}"

    def kill_proxy(self, index: int = 0) -> None:
        process = self.proxies[index]
        process.popen.send_signal(signal.SIGKILL)
        process.popen.wait()

    def kill(self, broker_id: int) -> None:
        process = self.brokers[broker_id]
        process.popen.send_signal(signal.SIGKILL)
        process.popen.wait()

    def pause(self, broker_id: int) -> None:
        os.kill(self.brokers[broker_id].pid, signal.SIGSTOP)

    def resume(self, broker_id: int) -> None:
        os.kill(self.brokers[broker_id].pid, signal.SIGCONT)

    def stop(self) -> None:
        for process in self.brokers.values():
            if process.alive():
                with suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGCONT)  # a paused process cannot stop
        self.supervisor.stop_all()


def _script(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def start_etcd(folder: Path, *, unsafe_no_fsync: bool = False) -> EmbeddedEtcd:
    """An etcd on free ports under ``folder``, started; three tries, since a port picked by
    ``free_ports`` may be taken before etcd binds it."""
    for attempt in range(1, 4):
        client_port, peer_port = free_ports(2)
        server = EmbeddedEtcd(
            folder / f"etcd-{attempt}", client_port, peer_port, unsafe_no_fsync=unsafe_no_fsync
        )
        try:
            return server.start()
        except StartupError:
            if attempt == 3:
                raise
    raise AssertionError("unreachable")


def _start_brokers(cluster: LocalCluster, broker_ids: Sequence[int]) -> None:
    """Start brokers ``broker_ids`` side by side (each start is mostly its process importing,
    then waiting to be ready: 3 brokers are ready in ~3.7 s instead of ~5.2 s one after the
    other on 2 cores). Ports are picked first, in order, and ``cluster.brokers`` keeps the
    ids' order; the first broker that does not start raises its StartupError."""
    ids = [b for b in broker_ids if b not in cluster.broker_ports]
    for broker_id, port in zip(ids, free_ports(len(ids)), strict=True):
        cluster.broker_ports[broker_id] = port
    with ThreadPoolExecutor(max_workers=max(len(broker_ids), 1)) as pool:
        started = [pool.submit(cluster.start_broker, b) for b in broker_ids]
        processes = [future.result() for future in started]
    for broker_id, process in zip(broker_ids, processes, strict=True):
        cluster.brokers.pop(broker_id, None)
        cluster.brokers[broker_id] = process


@contextmanager
def local_cluster(
    folder: Path,
    etcd: EmbeddedEtcd,
    cluster_id: str,
    brokers: int = 3,
    *,
    lease_ttl_s: int = 2,
    replica_lag_time_max_ms: int = 5_000,
    coordinator_env: Mapping[str, str] | None = None,
    broker_env: Mapping[str, str] | None = None,
    python_path: Sequence[str] = (),
) -> Iterator[LocalCluster]:
    """Start a coordinator (with ``coordinator_env`` added to its environment) and ``brokers``
    brokers on ``etcd`` (``broker_env`` added to theirs, restarts included); stop them all at
    the end. ``python_path``: run other code (see the module doc)."""
    cluster = LocalCluster(folder, etcd, cluster_id, lease_ttl_s, replica_lag_time_max_ms)
    cluster.python_path = tuple(python_path)
    cluster.broker_env = dict(broker_env or {})
    try:
        cluster.start_coordinator(0, **(coordinator_env or {}))
        _start_brokers(cluster, range(brokers))
        yield cluster
    finally:
        cluster.stop()


async def wait_for(
    admin: AdminClient, topic: str, predicate: str, timeout_s: float = 30.0
) -> TopicDescription:
    """Poll the admin API until ``predicate`` holds for every partition of ``topic``:
    ``"led"`` (a leader) or ``"full-isr"`` (ISR = replicas)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            described = await admin.describe_topic(topic)
            ok = all(
                p.leader >= 0 if predicate == "led" else sorted(p.isr) == sorted(p.replicas)
                for p in described.partitions
            )
            if ok:
                return described
        except (YakError, OSError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}: not {predicate} within {timeout_s} s")
        await asyncio.sleep(0.1)  # another process's state: nothing local to wait on


class RegistrationWatch:
    """Follows the cluster's metadata and records when each broker's registration vanished
    (its lease expired, or it deregistered) — the start of a failover as the controller sees
    it. ``expired_after(broker_id, t)``: the first such moment after ``t``."""

    def __init__(self, cluster: LocalCluster) -> None:
        self._store = EtcdMetadataStore.from_url(cluster.etcd.endpoint)
        self._cache = MetadataCache(self._store, Keyspace(cluster.cluster_id), on_change=self._seen)
        self._present: set[int] = set()
        self.vanished: list[tuple[int, float]] = []

    def _seen(self, parsed: ParsedKey) -> None:
        if parsed.kind is not KeyKind.BROKER:
            return
        now = time.monotonic()
        snapshot = self._cache.snapshot
        for broker_id in self._present - set(snapshot.brokers):
            self.vanished.append((broker_id, now))
        self._present = set(snapshot.brokers)

    async def __aenter__(self) -> RegistrationWatch:
        await self._cache.start()
        self._present = set(self._cache.snapshot.brokers)
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self._cache.stop()
        await self._store.aclose()

    def expired_after(self, broker_id: int, since: float) -> float | None:
        return next((t for b, t in self.vanished if b == broker_id and t >= since), None)


@dataclass(frozen=True)
class Ack:
    offset: int
    value: bytes
    acked_at: float


class IdempotentProducer:
    """acks=all batches of ``records_per_batch`` records to one partition, retried until
    acknowledged with the same producer id, epoch and sequence."""

    def __init__(
        self,
        cluster: LocalCluster,
        admin: AdminClient,
        topic: str,
        partition: int,
        producer_id: int,
        *,
        value_size: int = 16,
        records_per_batch: int = 1,
        timeout_ms: int = 5_000,
    ) -> None:
        self.cluster = cluster
        self.admin = admin
        self.topic = topic
        self.partition = partition
        self.producer_id = producer_id
        self.value_size = value_size
        self.records_per_batch = records_per_batch
        self.timeout_ms = timeout_ms
        self.sequence = 0
        self.acks: list[Ack] = []
        self.retries = 0
        self.errors: dict[str, int] = {}
        self._leader = -1
        self._clients: dict[int, BrokerClient] = {}

    async def _refresh_leader(self) -> None:
        try:
            described = await self.admin.describe_topic(self.topic)
            self._leader = described.partitions[self.partition].leader
        except (YakError, OSError):
            self._leader = -1

    def _client(self) -> BrokerClient:
        if self._leader not in self._clients:
            url = self.cluster.broker_url(self._leader)
            self._clients[self._leader] = BrokerClient(url, timeout_s=self.timeout_ms / 1000 + 5)
        return self._clients[self._leader]

    def _values(self) -> list[bytes]:
        stem = f"p{self.partition}-s{self.sequence}-r"
        return [
            (stem + str(i)).encode().ljust(self.value_size, b".")
            for i in range(self.records_per_batch)
        ]

    async def send_one(self) -> None:
        """Produce the next batch; retry the same batch until it is acknowledged."""
        values = self._values()
        batch = encode_batch(
            [RecordInput(value=v, timestamp=0) for v in values],
            producer_id=self.producer_id,
            producer_epoch=0,
            base_sequence=self.sequence,
        )
        while True:
            if self._leader < 0:
                await self._refresh_leader()
            if self._leader >= 0:
                try:
                    result = await self._client().produce_one(
                        self.topic, self.partition, batch, acks=-1
                    )
                    now = time.monotonic()
                    for i, value in enumerate(values):
                        self.acks.append(Ack(result.base_offset + i, value, now))
                    self.sequence += len(values)
                    return
                except (YakError, OSError) as exc:
                    code = exc.code if isinstance(exc, YakError) else type(exc).__name__
                    self.errors[code] = self.errors.get(code, 0) + 1
                    if isinstance(exc, YakError) and not exc.retriable:
                        raise
            self.retries += 1
            self._leader = -1
            await asyncio.sleep(0.05)

    async def run(self, stop: asyncio.Event, interval_s: float = 0.0) -> None:
        while not stop.is_set():
            await self.send_one()
            if interval_s:
                await asyncio.sleep(interval_s)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()


async def read_partition(
    client: BrokerClient, topic: str, partition: int
) -> list[tuple[int, bytes]]:
    """Every committed record of a partition from offset 0, as (offset, value)."""
    out: list[tuple[int, bytes]] = []
    offset = 0
    while True:
        fetched = await client.fetch_one(topic, partition, offset, max_wait_ms=0)
        records = list(iter_records(fetched.records))
        for record in records:
            if record.offset >= offset:
                out.append((record.offset, bytes(record.value or b"")))
        if not records:
            return out
        offset = records[-1].offset + 1
        if offset >= fetched.high_watermark:
            return out
