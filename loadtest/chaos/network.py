"""Where each process of the chaos cluster lives: on loopback, or each in a network namespace
of its own that the suite creates, so that links between two of them can be cut.

``NamespaceNetwork`` builds, for a run with prefix ``yakchaos<id>``: a hub namespace holding a
bridge, and per node (``etcd-0``, ``broker-1``, ``proxy-0``, ``client`` ...) a namespace joined
to the hub by a veth pair created *inside* the namespaces (``ip -n hub link add ... peer
... netns <node>``), with an address from ``10.77.0.0/24`` on the node's end. Nothing in the
host's own namespace is created, changed or removed: no interface, route, address or firewall
rule. A **cut** between two nodes is a blackhole route for the other's address in each of
the two namespaces (packets vanish, as in a real partition: TCP retransmits until it gives
up). A **one-way drop** from ``a`` to ``b`` is an nftables table (``inet yakchaos``) in
``b``'s namespace whose input chain drops what comes from ``a``'s address: ``a``'s packets
are lost on the way, ``b``'s still reach ``a``. A **degraded link** (delay, jitter, loss:
``netem``, which this kernel lacks, see ``delayer``) is two iptables ``NFQUEUE`` rules on the
node's ``eth0`` (in and out) and a ``delayer`` process in its namespace. **heal_all** deletes
the routes, flushes the rule sets of the namespaces it put rules in and stops the delayers;
``leftovers`` reports anything of that still there. Deleting a namespace (``close``,
``cleanup_leftovers``) takes its routes and rules with it.

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
import sys
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from yak.etcd_server import free_ports

__all__ = [
    "PREFIX",
    "Degradation",
    "LoopbackNetwork",
    "NamespaceNetwork",
    "Network",
    "cleanup_leftovers",
    "delayer_argv",
    "drop_ruleset",
    "queue_rules",
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


#: The nftables table of one-way drops (in the receiving node's namespace).
DROP_TABLE = "yakchaos"
ROOT = Path(__file__).resolve().parents[2]


def _ip(*args: str) -> None:
    subprocess.run(("ip", *args), check=True, capture_output=True, timeout=10)


def drop_ruleset(sources: Iterable[str]) -> str:
    """The ``nft -f`` script that makes the one-way drop table drop exactly what comes from
    ``sources`` (addresses): it is created if missing, then replaced as a whole."""
    lines = [
        f"table inet {DROP_TABLE} {{}}",
        f"delete table inet {DROP_TABLE}",
        f"table inet {DROP_TABLE} {{",
        "  chain input {",
        "    type filter hook input priority 0; policy accept;",
    ]
    lines += [f"    ip saddr {address} drop" for address in sorted(set(sources))]
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def queue_rules(queue: int) -> list[tuple[str, ...]]:
    """The iptables commands that send every packet of ``eth0`` (both ways) to ``queue``;
    ``--queue-bypass``: when no program listens on the queue, packets pass untouched."""
    target = ("-j", "NFQUEUE", "--queue-num", str(queue), "--queue-bypass")
    return [
        ("iptables", "-w", "5", "-I", "INPUT", "-i", "eth0", *target),
        ("iptables", "-w", "5", "-I", "OUTPUT", "-o", "eth0", *target),
    ]


@dataclass(frozen=True)
class Degradation:
    """A link's delay, jitter and loss, as ``tc qdisc ... netem delay D J loss L`` has them."""

    delay_ms: float
    jitter_ms: float
    loss: float

    def __str__(self) -> str:
        return f"{self.delay_ms:.0f}±{self.jitter_ms:.0f} ms, {self.loss:.0%} loss"


def delayer_argv(queue: int, degradation: Degradation, seconds: float) -> tuple[str, ...]:
    """The delayer's command (run inside the node's namespace, bounded to ``seconds``)."""
    return (
        sys.executable,
        "-m",
        "loadtest.chaos.delayer",
        *("--queue", str(queue), "--delay-ms", str(degradation.delay_ms)),
        *("--jitter-ms", str(degradation.jitter_ms), "--loss", str(degradation.loss)),
        *("--seconds", str(seconds)),
    )


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

    def drop_one_way(self, source: str, target: str) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot drop packets")

    def degrade(self, node: str, degradation: Degradation, seconds: float) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot degrade links")

    def heal_all(self) -> None:
        """Remove every cut, drop and degradation."""

    def leftovers(self) -> list[str]:
        """What of the faults is still in place after ``heal_all`` (nothing, normally)."""
        return []

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
        #: One-way drops: receiving node -> the nodes whose packets it drops.
        self._drops: dict[str, set[str]] = {}
        #: Namespaces given nft/iptables rules (flushed by ``heal_all``).
        self._ruled: set[str] = set()
        #: Namespaces any fault touched since the last clean ``leftovers`` check.
        self._touched: set[str] = set()
        self._delayers: dict[str, subprocess.Popen[bytes]] = {}
        #: Where delayers write their output (the run's logs folder), if set.
        self.log_dir: Path | None = None
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
        self._touched |= {a, b}
        for x, y in ((a, b), (b, a)):
            if (x, y) not in self._cuts:
                self._route("add", x, y)
                self._cuts.add((x, y))

    def _run_in(self, node: str, argv: Sequence[str], stdin: str | None = None) -> None:
        self._ruled.add(node)  # before the command: a half-applied rule is healed too
        self._touched.add(node)
        subprocess.run(
            self.wrap(node, argv),
            input=stdin,
            text=True,
            check=True,
            capture_output=True,
            timeout=10,
        )

    def drop_one_way(self, source: str, target: str) -> None:
        """Drop ``source``'s packets to ``target`` (at ``target``'s input); the other way
        stays open."""
        sources = self._drops.setdefault(target, set())
        sources.add(source)
        script = drop_ruleset(self.host(s) for s in sources)
        self._run_in(target, ("nft", "-f", "-"), stdin=script)

    def degrade(self, node: str, degradation: Degradation, seconds: float) -> None:
        """Delay, jitter and drop every packet of ``node``'s link for at most ``seconds``
        (the delayer exits by itself then; ``heal_all`` ends it sooner)."""
        queue = _HOSTS[node]
        path = self.log_dir / f"delayer-{node}.log" if self.log_dir else None
        before = path.stat().st_size if path and path.exists() else 0
        self._touched.add(node)
        with path.open("ab") if path else open(os.devnull, "wb") as log:
            self._delayers[node] = subprocess.Popen(
                self.wrap(node, delayer_argv(queue, degradation, seconds)),
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        for rule in queue_rules(queue):
            self._run_in(node, rule)
        # until the delayer has bound its queue (packets pass untouched before): at most 5 s
        deadline = time.monotonic() + 5.0
        while path and time.monotonic() < deadline:
            with path.open("rb") as log:
                log.seek(before)
                if b"delayer: queue" in log.read():
                    break
            time.sleep(0.05)

    def _stop_delayer(self, process: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()  # accepts what it holds, then exits
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def heal_all(self) -> None:
        for x, y in sorted(self._cuts):
            with contextlib.suppress(subprocess.CalledProcessError):
                self._route("del", x, y)
        self._cuts.clear()
        # rules first (packets flow again untouched), then the delayers holding packets
        for node in sorted(self._ruled):
            with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
                subprocess.run(
                    self.wrap(node, ("nft", "flush", "ruleset")),
                    check=True,
                    capture_output=True,
                    timeout=10,
                )
                self._ruled.discard(node)
        self._drops.clear()
        for process in self._delayers.values():
            self._stop_delayer(process)
        self._delayers.clear()

    def leftovers(self) -> list[str]:
        """Blackhole routes, nft/iptables rules or delayers still in place in the namespaces
        touched since the last call (checked after every heal)."""
        found = []
        for node in sorted(self._touched):
            routes = subprocess.run(
                ("ip", "-n", self.namespace(node), "route", "show", "type", "blackhole"),
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
            if routes:
                found.append(f"{node}: routes {routes!r}")
            rules = subprocess.run(
                self.wrap(node, ("nft", "list", "ruleset")),
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
            if rules:
                found.append(f"{node}: rules {' '.join(rules.split())[:200]!r}")
        found += [f"{n}: delayer {p.pid} running" for n, p in self._delayers.items()]
        if not found:
            self._touched.clear()
        return found

    def close(self) -> None:
        """Delete the namespaces (their veths go with them; processes must be gone first:
        ``kill_inside`` ends any left)."""
        for process in self._delayers.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._stop_delayer(process)
        self._delayers.clear()
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
