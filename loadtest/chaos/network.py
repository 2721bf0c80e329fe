"""Where each process of the chaos cluster lives: on loopback, or each in a network namespace
of its own that the suite creates, so that links between two of them can be cut.

``NamespaceNetwork`` builds, for a run with prefix ``yakchaos<id>``: a hub namespace holding a
bridge, and per node (``etcd-0``, ``broker-1``, ``proxy-0``, ``client`` ...) a namespace joined
to the hub by a veth pair created *inside* the namespaces (``ip -n hub link add ... peer
... netns <node>``), with an address from ``10.77.0.0/24`` on the node's end. Nothing in the
host's own namespace is created, changed or removed: no interface, route, address or firewall
rule. A **cut** between two nodes is a blackhole route for the other's address in each of
the two namespaces (packets vanish, as in a real partition: TCP retransmits until it gives
up); **heal** deletes those routes.

The driver itself joins the ``client`` namespace (``join``, through ``setns(2)``; Python 3.11
has no ``os.setns``) before it starts any thread, so its HTTP clients and health checks reach
the nodes and every process it starts inherits that namespace unless started through
``ip netns exec``.

``LoopbackNetwork`` is the same interface on 127.0.0.1 with free ports, for classes that need
no partition (the smoke test runs on it without creating anything).

``cleanup_leftovers`` removes namespaces of an earlier run that died before cleaning up (their
processes first): every name with the prefix ``yakchaos``, which only this suite uses.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from yak.etcd_server import free_ports

__all__ = [
    "PREFIX",
    "LoopbackNetwork",
    "NamespaceNetwork",
    "Network",
    "cleanup_leftovers",
]

PREFIX = "yakchaos"
SUBNET = "10.77.0"
_CLONE_NEWNET = 0x40000000
#: Last byte of each node's address (``client`` is the driver).
_HOSTS = {"client": 10}
for _kind, _base in (("etcd", 20), ("broker", 30), ("coordinator", 40), ("proxy", 50)):
    for _index in range(8):
        _HOSTS[f"{_kind}-{_index}"] = _base + _index
#: The port each kind of node listens on in its own namespace (one node per address).
_PORTS = {"etcd": 2379, "etcd-peer": 2380, "broker": 9092, "broker-data": 9093}
_PORTS |= {"coordinator": 8081, "proxy": 8082}


def _ip(*args: str) -> None:
    subprocess.run(("ip", *args), check=True, capture_output=True, timeout=10)


class Network:
    """Hosts, ports and command prefixes per node (see the module doc)."""

    partitions = False

    def host(self, node: str) -> str:
        raise NotImplementedError

    def port(self, node: str, service: str) -> int:
        raise NotImplementedError

    def wrap(self, node: str, argv: Sequence[str]) -> tuple[str, ...]:
        """The command that runs ``argv`` as ``node``."""
        return tuple(argv)

    def cut(self, a: str, b: str) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot cut links")

    def heal_all(self) -> None:
        """Remove every cut."""

    def close(self) -> None:
        """Remove what was created."""


@dataclass
class LoopbackNetwork(Network):
    """Every node on 127.0.0.1, each service on a free port."""

    _ports: dict[tuple[str, str], int] = field(default_factory=dict)

    def host(self, node: str) -> str:
        return "127.0.0.1"

    def port(self, node: str, service: str) -> int:
        key = (node, service)
        if key not in self._ports:
            (self._ports[key],) = free_ports(1)
        return self._ports[key]


class NamespaceNetwork(Network):
    """One namespace per node, joined by veths to a bridge in a hub namespace."""

    partitions = True

    def __init__(self, nodes: Iterable[str], run_id: str | None = None) -> None:
        self.prefix = f"{PREFIX}{run_id or uuid.uuid4().hex[:6]}"
        self.hub = f"{self.prefix}-hub"
        self.nodes = ["client", *nodes]
        self._created: list[str] = []
        self._cuts: set[tuple[str, str]] = set()
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def namespace(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def _build(self) -> None:
        _ip("netns", "add", self.hub)
        self._created.append(self.hub)
        _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.hub, "link", "set", "br0", "up")
        for number, node in enumerate(self.nodes):
            ns = self.namespace(node)
            _ip("netns", "add", ns)
            self._created.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            veth = f"v{number}"
            _ip(
                "-n",
                self.hub,
                "link",
                "add",
                veth,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                ns,
            )
            _ip("-n", self.hub, "link", "set", veth, "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{self.host(node)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")

    def join(self, node: str = "client") -> None:
        """Move this process (its calling thread, before any other exists) into ``node``'s
        namespace."""
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/run/netns/{self.namespace(node)}", os.O_RDONLY)
        try:
            if libc.setns(fd, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns failed")
        finally:
            os.close(fd)

    def host(self, node: str) -> str:
        return f"{SUBNET}.{_HOSTS[node]}"

    def port(self, node: str, service: str) -> int:
        return _PORTS[service]

    def wrap(self, node: str, argv: Sequence[str]) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.namespace(node), *argv)

    def _route(self, verb: str, a: str, b: str) -> None:
        _ip("-n", self.namespace(a), "route", verb, "blackhole", f"{self.host(b)}/32")

    def cut(self, a: str, b: str) -> None:
        """Cut the link between ``a`` and ``b`` both ways."""
        for x, y in ((a, b), (b, a)):
            if (x, y) not in self._cuts:
                self._route("add", x, y)
                self._cuts.add((x, y))

    def heal_all(self) -> None:
        for x, y in sorted(self._cuts):
            with contextlib.suppress(subprocess.CalledProcessError):
                self._route("del", x, y)
        self._cuts.clear()

    def close(self) -> None:
        """Delete the namespaces (their veths go with them; processes must be gone first:
        ``kill_inside`` ends any left)."""
        for ns in reversed(self._created):
            kill_inside(ns)
            with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
                _ip("netns", "del", ns)
        self._created.clear()


def kill_inside(namespace: str) -> None:
    """SIGKILL every process still in ``namespace`` (SIGCONT first: a paused one too) but
    this one (the driver lives in the ``client`` namespace)."""
    found = subprocess.run(
        ("ip", "netns", "pids", namespace), capture_output=True, text=True, timeout=10
    )
    for pid in found.stdout.split():
        if int(pid) == os.getpid():
            continue
        for sig in (signal.SIGCONT, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), sig)


def cleanup_leftovers() -> list[str]:
    """Remove every ``yakchaos*`` namespace (an earlier run's); the names removed."""
    listed = subprocess.run(("ip", "netns", "list"), capture_output=True, text=True, timeout=10)
    removed = []
    for line in listed.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(PREFIX):
            kill_inside(name)
            with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
                _ip("netns", "del", name)
            removed.append(name)
    return removed
