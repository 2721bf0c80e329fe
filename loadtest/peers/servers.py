"""The systems under test, started on 127.0.0.1 in temporary folders and stopped afterwards.

- **redis-server** (Debian's): AOF on (``appendonly yes``), ``appendfsync everysec`` — at most
  one second of acknowledged writes lost on a crash — and no RDB snapshots;
- **nats-server** (Debian's) with JetStream, file storage in the temporary folder;
- **Yak**: an etcd, a coordinator, three brokers and one rest-proxy
  (``loadtest.local_cluster``); Yak's default flush policy (no fsync per write: durability
  from replication, as Kafka's), topics with replication factor 3 and ``min.insync.replicas``
  2, acks=all. etcd runs with ``unsafe_no_fsync``: it holds metadata and, on the consume
  path, group members' positions (a read and a write per poll), like the consumer-group state
  Redis keeps in memory and its append-only file (fsync once a second).

Each context manager yields the URL clients connect to and stops the processes on exit, also
on errors. ``versions`` reports the exact server versions for the report.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from loadtest.local_cluster import local_cluster
from yak.etcd_server import EmbeddedEtcd, free_ports

__all__ = ["YakServer", "nats_server", "redis_server", "server_versions", "yak_server"]

HOST = "127.0.0.1"
READY_TIMEOUT_S = 30.0


def _binary(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")
    if found is None:
        raise FileNotFoundError(f"{name} is not installed (make peers installs it)")
    return found


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"exited with {process.returncode}; see {log}")
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)  # another process's startup: nothing local to wait on
    raise TimeoutError(f"not listening on {port} after {READY_TIMEOUT_S} s; see {log}")


@contextmanager
def _process(argv: list[str], port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for_port(port, process, log)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def redis_server() -> Iterator[str]:
    """A redis-server with AOF + fsync every second; yields ``redis://127.0.0.1:port``."""
    with tempfile.TemporaryDirectory(prefix="yak-peers-redis-") as tmp:
        (port,) = free_ports(1)
        argv = [
            _binary("redis-server"),
            *("--bind", HOST, "--port", str(port), "--dir", tmp),
            *("--appendonly", "yes", "--appendfsync", "everysec", "--save", ""),
            *("--protected-mode", "no", "--daemonize", "no", "--logfile", ""),
        ]
        with _process(argv, port, Path(tmp) / "redis.log"):
            yield f"redis://{HOST}:{port}"


@contextmanager
def nats_server() -> Iterator[str]:
    """A nats-server with JetStream on file storage; yields ``nats://127.0.0.1:port``."""
    with tempfile.TemporaryDirectory(prefix="yak-peers-nats-") as tmp:
        (port,) = free_ports(1)
        argv = [
            _binary("nats-server"),
            *("-a", HOST, "-p", str(port), "-js", "-sd", str(Path(tmp) / "jetstream")),
        ]
        with _process(argv, port, Path(tmp) / "nats.log"):
            yield f"nats://{HOST}:{port}"


@dataclass(frozen=True)
class YakServer:
    """A running local Yak cluster: the rest-proxy's URL and process id (for py-spy)."""

    url: str
    proxy_pid: int


@contextmanager
def yak_server(brokers: int = 3) -> Iterator[YakServer]:
    """etcd, a coordinator, ``brokers`` brokers and one rest-proxy (see the module doc)."""
    with tempfile.TemporaryDirectory(prefix="yak-peers-yak-") as tmp:
        folder = Path(tmp)
        client_port, peer_port = free_ports(2)
        etcd = EmbeddedEtcd(folder / "etcd", client_port, peer_port, unsafe_no_fsync=True)
        etcd.start()
        try:
            cluster_id = f"peers{uuid.uuid4().hex[:8]}"
            # The brokers' groups as ``yak up`` sets them (no initial rebalance delay).
            brokers_env = {"YAK_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"}
            with local_cluster(
                folder, etcd, cluster_id, brokers=brokers, broker_env=brokers_env
            ) as cluster:
                proxy = cluster.start_proxy(0)
                yield YakServer(cluster.proxy_url(0), proxy.pid)
        finally:
            etcd.stop()


def server_versions() -> dict[str, str]:
    """Exact versions of the servers and of this Python, as their binaries report them."""
    out: dict[str, str] = {"python": sys.version.split()[0]}
    for name, flag in (("redis-server", "--version"), ("nats-server", "--version")):
        try:
            text = subprocess.run(
                [_binary(name), flag], capture_output=True, text=True, check=True, timeout=10
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            text = "not installed"
        out[name] = text
    return out
