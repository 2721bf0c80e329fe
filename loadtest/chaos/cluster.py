"""The chaos suite's processes: 3 etcd members, 2 coordinators, 3 brokers, 2 rest-proxies,
each a node of a ``Network`` (its own namespace, or loopback), every one of them killable,
pausable and restartable on its own data folder, address and port.

Unlike ``loadtest.local_cluster`` (one etcd on 127.0.0.1) this cluster runs a 3-member etcd
and puts each process behind ``Network.wrap`` so partitions can isolate it. Services get the
first etcd member's URL, or all three comma-separated with ``etcd_list`` (the multi-endpoint
form issue 21 adds to every service; a service that does not understand it fails to start).
Brokers run with 2 s leases, as in the other fault tests, so failures are noticed fast. The
broker named ``shim_broker`` runs with the LD_PRELOAD shim (``shim``): the slow disk and the
clock jumps are its.

``revive`` restarts whatever died without being asked to (a crash the faults provoked): the
runner calls it after each fault and reports what it found.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from loadtest.chaos.disks import BrokerDisks
from loadtest.chaos.network import Network
from loadtest.chaos.shim import Shim
from yak.api.admin import TopicDescription
from yak.clients.admin import AdminClient
from yak.errors import TopicAlreadyExistsError, YakError
from yak.etcd_binary import find_etcd
from yak.supervisor import ManagedProcess, ProcessSpec, StartupError, Supervisor

__all__ = ["BROKERS", "COORDINATORS", "ETCD_MEMBERS", "PROXIES", "ChaosCluster", "is_leader"]

ETCD_MEMBERS = ("etcd-0", "etcd-1", "etcd-2")
COORDINATORS = ("coordinator-0", "coordinator-1")
BROKERS = ("broker-0", "broker-1", "broker-2")
PROXIES = ("proxy-0", "proxy-1")


def is_leader(metrics: str) -> bool:
    """Whether an etcd member's ``/metrics`` text says it is the raft leader
    (``etcd_server_is_leader 1``)."""
    for line in metrics.splitlines():
        name, _, value = line.partition(" ")
        if name == "etcd_server_is_leader":
            return value.strip() in ("1", "1.0")
    return False


#: How a service starts on ``python_path``: its package's ``main``, run by this interpreter.
_LAUNCH = "import sys; sys.argv[0] = {script!r}; from {package}.main import main; main()"


@dataclass
class ChaosCluster:
    folder: Path
    network: Network
    cluster_id: str
    shim: Shim | None = None
    shim_broker: str = "broker-2"
    #: The brokers' size-limited data folders (``disks``), when mounted.
    disks: BrokerDisks | None = None
    etcd_list: bool = False
    lease_ttl_s: int = 2
    supervisor: Supervisor = field(default_factory=Supervisor)
    processes: dict[str, ManagedProcess] = field(default_factory=dict)
    #: Nodes stopped on purpose (a kill -9 not yet followed by ``start``).
    down: set[str] = field(default_factory=set)
    paused: set[str] = field(default_factory=set)
    #: Folders first on the services' PYTHONPATH (an exported commit); empty: this checkout.
    python_path: tuple[str, ...] = ()

    # --- addresses -----------------------------------------------------------------------

    def url(self, node: str) -> str:
        kind = node.rsplit("-", 1)[0]
        return f"http://{self.network.host(node)}:{self.network.port(node, kind)}"

    def etcd_urls(self) -> list[str]:
        return [self.url(m) for m in ETCD_MEMBERS]

    @property
    def etcd_endpoint(self) -> str:
        """What services get as ``YAK_ETCD``."""
        return ",".join(self.etcd_urls()) if self.etcd_list else self.etcd_urls()[0]

    def proxy_urls(self) -> list[str]:
        return [self.url(p) for p in PROXIES]

    def coordinator_urls(self) -> list[str]:
        return [self.url(c) for c in COORDINATORS]

    def broker_url(self, broker_id: int) -> str:
        return self.url(f"broker-{broker_id}")

    def data_dir(self, node: str) -> Path:
        return self.folder / "data" / node

    # --- starting ------------------------------------------------------------------------

    def _command(self, script: str) -> list[str]:
        """The argv start of service ``script`` (``yak-broker`` ...), on ``python_path``."""
        if not self.python_path:
            return [str(Path(sys.executable).with_name(script))]
        package = script.replace("-", "_")
        return [sys.executable, "-c", _LAUNCH.format(package=package, script=script)]

    def _spec(self, node: str, argv: list[str], env: dict[str, str], health: str | None) -> None:
        spec = ProcessSpec(
            name=node,
            argv=self.network.wrap(node, argv),
            log_path=self.folder / "logs" / f"{node}.log",
            health_url=health,
            url=self.url(node),
            env={**env, "PYTHONPATH": os.pathsep.join(self.python_path)}
            if self.python_path
            else env,
            ready_timeout_s=40.0,
        )
        self.processes[node] = self.supervisor.start(spec)
        self.down.discard(node)
        self.paused.discard(node)

    def _etcd_argv(self, member: str) -> list[str]:
        net = self.network
        peers = {m: f"http://{net.host(m)}:{net.port(m, 'etcd-peer')}" for m in ETCD_MEMBERS}
        client = self.url(member)
        return [
            str(find_etcd().path),
            f"--name={member}",
            f"--data-dir={self.data_dir(member)}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peers[member]}",
            f"--initial-advertise-peer-urls={peers[member]}",
            "--initial-cluster=" + ",".join(f"{m}={u}" for m, u in peers.items()),
            "--initial-cluster-state=new",
            f"--initial-cluster-token={self.cluster_id}",
            "--auto-compaction-mode=revision",
            "--auto-compaction-retention=1000",
            "--pre-vote",  # as yak up runs it (yak.etcd_server)
            "--logger=zap",
            "--log-outputs=stderr",
        ]

    def start_etcd(self, member: str, *, wait: bool = True) -> None:
        """Start (or restart, on its data folder) one etcd member; ``wait``: until the
        cluster answers healthy through it (a lone first member has no quorum yet)."""
        self._spec(member, self._etcd_argv(member), find_etcd().env(), None)
        if wait:
            self.wait_etcd_healthy(member)

    def wait_etcd_healthy(self, member: str, timeout_s: float = 40.0) -> None:
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=1.0) as client:
            while time.monotonic() < deadline:
                if not self.processes[member].alive():
                    raise StartupError(f"{member} exited during startup")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.url(member)}/health").status_code == 200:
                        return
                time.sleep(0.1)
        raise StartupError(f"{member} not healthy within {timeout_s:.0f} s")

    def start_coordinator(self, node: str) -> None:
        index = node.rsplit("-", 1)[1]
        argv = [
            *self._command("yak-coordinator"),
            *(
                "--host",
                self.network.host(node),
                "--port",
                str(self.network.port(node, "coordinator")),
            ),
            *("--etcd", self.etcd_endpoint, "--cluster-id", self.cluster_id),
            *("--node-id", f"c{index}", "--lease-ttl", str(self.lease_ttl_s)),
            *("--log-level", "warning"),
        ]
        self._spec(node, argv, {}, f"{self.url(node)}/readyz")

    def start_broker(self, node: str) -> None:
        broker_id = node.rsplit("-", 1)[1]
        host, net = self.network.host(node), self.network
        env = {
            "YAK_ETCD": self.etcd_endpoint,
            "YAK_CLUSTER_ID": self.cluster_id,
            "YAK_NODE_ID": broker_id,
            "YAK_DATA_DIR": str(self.data_dir(node)),
            "YAK_DATA_PORT": str(net.port(node, "broker-data")),
            "YAK_LEASE_TTL_S": str(self.lease_ttl_s),
            "YAK_REPLICA_LAG_TIME_MAX_MS": "5000",
            "YAK_LOG_LEVEL": "info",
        }
        if self.shim is not None and node == self.shim_broker:
            env |= self.shim.env()
        port = str(net.port(node, "broker"))
        argv = [*self._command("yak-broker"), "--host", host, "--port", port]
        self._spec(node, argv, env, f"{self.url(node)}/readyz")

    def start_proxy(self, node: str) -> None:
        index = node.rsplit("-", 1)[1]
        net = self.network
        env = {
            "YAK_ETCD": self.etcd_endpoint,
            "YAK_CLUSTER_ID": self.cluster_id,
            "YAK_NODE_ID": index,
            "YAK_LOG_LEVEL": "info",
        }
        argv = [
            *self._command("yak-rest-proxy"),
            *("--host", net.host(node), "--port", str(net.port(node, "proxy"))),
        ]
        self._spec(node, argv, env, f"{self.url(node)}/readyz")

    def start(self, node: str) -> None:
        """Start (or restart) any node by name."""
        kind = node.rsplit("-", 1)[0]
        if kind == "etcd":
            self.start_etcd(node)
        elif kind == "coordinator":
            self.start_coordinator(node)
        elif kind == "broker":
            self.start_broker(node)
        else:
            self.start_proxy(node)

    def start_all(self) -> None:
        for member in ETCD_MEMBERS:
            self.start_etcd(member, wait=False)
        for member in ETCD_MEMBERS:
            self.wait_etcd_healthy(member)
        for node in (*COORDINATORS, *BROKERS, *PROXIES):
            self.start(node)

    # --- faults --------------------------------------------------------------------------

    def kill(self, node: str) -> None:
        """kill -9, reaped; the node stays down until ``start``."""
        process = self.processes[node]
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
        process.popen.wait()
        self.down.add(node)
        self.paused.discard(node)

    def pause(self, node: str) -> None:
        os.kill(self.processes[node].pid, signal.SIGSTOP)
        self.paused.add(node)

    def resume(self, node: str) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.processes[node].pid, signal.SIGCONT)
        self.paused.discard(node)

    def revive(self) -> list[str]:
        """Resume what is paused and start what has exited; the nodes that had died without
        being killed by the suite (each a finding)."""
        for node in list(self.paused):
            self.resume(node)
        crashed = []
        for node, process in self.processes.items():
            if not process.alive():
                if node not in self.down:
                    crashed.append(f"{node} {process.popen.returncode}")
                for _ in range(3):
                    try:
                        self.start(node)
                        break
                    except StartupError as exc:
                        crashed.append(f"{node} failed to start: {str(exc)[-300:]}")
        return crashed

    def stop(self) -> None:
        for node in list(self.paused):
            self.resume(node)
        self.supervisor.stop_all(grace_s=5.0)

    async def etcd_leader(self) -> str | None:
        """The etcd member that says it is the raft leader (its ``/metrics``, each member asked
        at once, 1 s each), or None: none answered so (an election, a paused leader)."""

        async def ask(client: httpx.AsyncClient, member: str) -> str | None:
            if member in self.down or member in self.paused:
                return None
            with contextlib.suppress(httpx.HTTPError):
                answer = await client.get(f"{self.url(member)}/metrics")
                if answer.status_code == 200 and is_leader(answer.text):
                    return member
            return None

        async with httpx.AsyncClient(timeout=1.0) as client:
            found = await asyncio.gather(*(ask(client, m) for m in ETCD_MEMBERS))
        return next((m for m in found if m is not None), None)

    async def etcd_term(self) -> int | None:
        """The highest raft term a reachable etcd member reports (``/v3/maintenance/status``
        through the JSON gateway, each member asked at once, 1 s each), or None if none
        answered. Every election raises the term by at least one, so the change over a class
        counts its elections (a pre-vote that fails does not raise it)."""

        async def ask(client: httpx.AsyncClient, member: str) -> int | None:
            if member in self.down or member in self.paused:
                return None
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError):
                answer = await client.post(f"{self.url(member)}/v3/maintenance/status", json={})
                if answer.status_code == 200:
                    return int(answer.json()["raftTerm"])
            return None

        async with httpx.AsyncClient(timeout=1.0) as client:
            terms = await asyncio.gather(*(ask(client, m) for m in ETCD_MEMBERS))
        known = [t for t in terms if t is not None]
        return max(known) if known else None

    async def diagnose(self) -> str:
        """What etcd and the brokers say about the brokers' registrations, for a recovery that
        timed out: the ``brokers/`` keys (and their leases) a linearizable read through etcd's
        JSON gateway finds, and each broker's own ``/readyz`` (registered or not)."""
        prefix = f"/yak/{self.cluster_id}/brokers/".encode()
        body = {
            "key": base64.b64encode(prefix).decode(),
            "range_end": base64.b64encode(prefix[:-1] + b"0").decode(),
        }
        parts = []
        async with httpx.AsyncClient(timeout=2.0) as client:
            for member in ETCD_MEMBERS:
                if member in self.down or member in self.paused:
                    continue
                try:
                    answer = (
                        await client.post(f"{self.url(member)}/v3/kv/range", json=body)
                    ).json()
                except (httpx.HTTPError, ValueError):
                    continue
                keys = [
                    f"{base64.b64decode(kv['key']).decode().rsplit('/', 1)[1]}"
                    f"@{int(kv.get('lease', 0)):#x}"
                    for kv in answer.get("kvs", [])
                ]
                revision = answer.get("header", {}).get("revision")
                parts.append(f"etcd ({member}, rev {revision}) brokers/ {keys}")
                break
            for broker in BROKERS:
                try:
                    ready = await client.get(f"{self.url(broker)}/readyz")
                    parts.append(f"{broker} readyz {ready.status_code} {ready.text[:80]!r}")
                except httpx.HTTPError as exc:
                    parts.append(f"{broker} readyz {type(exc).__name__}")
        return "; ".join(parts)

    # --- the admin API -------------------------------------------------------------------

    async def describe(self, topic: str) -> TopicDescription:
        """The topic as the first coordinator that answers describes it."""
        last: Exception | None = None
        for url in self.coordinator_urls():
            try:
                async with AdminClient(url, timeout_s=3.0) as admin:
                    return await admin.describe_topic(topic)
            except (YakError, OSError, httpx.HTTPError) as exc:
                last = exc
        raise RuntimeError(f"no coordinator described {topic}: {last!r}")

    async def controller(self) -> str | None:
        """The coordinator node that is the active controller, as the first coordinator that
        answers ``/cluster`` says (None: none answered, or no controller right now)."""
        for node in COORDINATORS:
            if node in self.down or node in self.paused:
                continue
            try:
                async with AdminClient(self.url(node), timeout_s=2.0) as admin:
                    info = await admin.cluster()
            except (YakError, OSError, httpx.HTTPError):
                continue
            if info.controller is None:
                return None
            return f"coordinator-{info.controller.coordinator_id.removeprefix('c')}"
        return None

    async def reorder_replicas(self, topic: str, partition: int, replicas: list[int]) -> None:
        """Give ``partition`` the same replicas in another order (a reassignment that moves
        nothing): the controller's preferred leader election then hands the leadership to
        ``replicas[0]`` once it is in the ISR."""
        last: Exception | None = None
        for url in self.coordinator_urls():
            try:
                async with AdminClient(url, timeout_s=10.0) as admin:
                    await admin.reassign_partition(topic, partition, replicas)
                    return
            except (YakError, OSError, httpx.HTTPError) as exc:
                last = exc
        raise RuntimeError(f"no coordinator reordered {topic}-{partition}: {last!r}")

    async def create_topic(
        self, topic: str, partitions: int, configs: dict[str, str] | None = None
    ) -> None:
        last: Exception | None = None
        for url in self.coordinator_urls():
            try:
                async with AdminClient(url, timeout_s=10.0) as admin:
                    await admin.create_topic(
                        topic,
                        partitions=partitions,
                        replication_factor=3,
                        configs={"min.insync.replicas": "2", **(configs or {})},
                    )
                    return
            except TopicAlreadyExistsError:
                return  # an earlier attempt's answer was lost, not its write
            except (YakError, OSError, httpx.HTTPError) as exc:
                last = exc
        raise RuntimeError(f"no coordinator created {topic}: {last!r}")
