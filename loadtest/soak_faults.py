"""The soak's faults: one every ``--fault-every``, rotating over the chaos suite's fault
classes that work on loopback, each healed before the soak goes on.

Why reuse ``loadtest.chaos`` rather than the soak's own restarts: the chaos suite already
knows how to kill, pause and restart every kind of process of a 3-member-etcd cluster and how
to slow one broker's disk (its LD_PRELOAD shim); the soak asks a different question of the
same faults — does anything leak or slow down over hours of them — so it runs them one at a
time, minutes apart, under steady load. Partitions need network namespaces and are left to
``make chaos``; a clock jump is left out too (the soak's own latency stamps are wall-clock).

Each fault returns a note (its target); ``heal`` then resumes what is paused, starts what
died (``ChaosCluster.revive``: a crash the fault provoked is reported) and waits for a full
ISR of the soak's topic. ``FaultLog`` keeps one entry per fault with its times for
``soak.json`` and the plots.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from loadtest.chaos.cluster import BROKERS, ChaosCluster
from loadtest.chaos.faults import FaultContext, kill_broker, kill_etcd, kill_proxy, slow_disk
from loadtest.chaos.runner import wait_full_isr
from yak.errors import YakError
from yak.metadata.keyspace import Keyspace

__all__ = ["FAULTS", "FaultLog", "SoakFault", "active_coordinator", "choose_faults"]

Inject = Callable[[FaultContext, int], Awaitable[str]]
#: SIGSTOP hold: longer than the brokers' 2 s lease, so the broker loses its registration
#: and its leaderships while it believes it still leads (what a long GC pause does).
PAUSE_S = 4.0
_FAILURES = (TimeoutError, RuntimeError, OSError, YakError, httpx.HTTPError)


@dataclass(frozen=True)
class SoakFault:
    name: str
    description: str
    inject: Inject
    #: Needs the LD_PRELOAD shim on ``ChaosCluster.shim_broker``.
    shim: bool = False


async def sigterm_broker(ctx: FaultContext, number: int) -> str:
    """SIGTERM (controlled shutdown) broker ``number % 3``, wait for it to exit, start it
    again on its folder: the orderly restart of an upgrade."""
    node = BROKERS[number % len(BROKERS)]
    process = ctx.cluster.processes[node]
    process.popen.send_signal(signal.SIGTERM)
    code = await asyncio.to_thread(process.popen.wait)
    ctx.cluster.down.add(node)
    await asyncio.to_thread(ctx.cluster.start, node)
    return f"{node} exit {code}"


async def pause_broker(ctx: FaultContext, number: int) -> str:
    """SIGSTOP broker ``number % 3`` for ``PAUSE_S``, then SIGCONT."""
    node = BROKERS[number % len(BROKERS)]
    ctx.cluster.pause(node)
    await asyncio.sleep(PAUSE_S)
    ctx.cluster.resume(node)
    return f"{node} {PAUSE_S:.0f}s"


async def active_coordinator(cluster: ChaosCluster) -> str | None:
    """The node name of the coordinator holding the ``controller`` key, read through etcd's
    JSON gateway from the first member that answers (None: no controller, or no member)."""
    key = Keyspace(cluster.cluster_id).controller
    body = {"key": base64.b64encode(key.encode()).decode()}
    async with httpx.AsyncClient(timeout=2.0) as client:
        for url in cluster.etcd_urls():
            with contextlib.suppress(httpx.HTTPError, ValueError):
                answer = (await client.post(f"{url}/v3/kv/range", json=body)).json()
                kvs = answer.get("kvs") or []
                if not kvs:
                    return None
                record = json.loads(base64.b64decode(kvs[0]["value"]))
                return f"coordinator-{str(record['coordinator_id']).removeprefix('c')}"
    return None


async def kill_active_coordinator(ctx: FaultContext, number: int) -> str:
    """kill -9 the active coordinator (the controller), restart it: the standby takes over."""
    node = await active_coordinator(ctx.cluster)
    if node is None or node not in ctx.cluster.processes:
        raise RuntimeError(f"no active coordinator found (controller key: {node})")
    ctx.cluster.kill(node)
    await asyncio.sleep(0.3)
    await asyncio.to_thread(ctx.cluster.start, node)
    return node


FAULTS = (
    SoakFault("kill-broker", "kill -9 a partition leader, restart it", kill_broker),
    SoakFault("sigterm-broker", "SIGTERM a broker, start it again", sigterm_broker),
    SoakFault("pause-broker", f"SIGSTOP a broker {PAUSE_S:.0f} s, SIGCONT", pause_broker),
    SoakFault("kill-proxy", "kill -9 a rest-proxy (each serves a client), restart", kill_proxy),
    SoakFault(
        "kill-coordinator", "kill -9 the active coordinator, restart", kill_active_coordinator
    ),
    SoakFault("kill-etcd", "kill -9 one of 3 etcd members, restart it", kill_etcd),
    SoakFault("slow-disk", "broker-2's writes and fsyncs slowed for 3 s", slow_disk, shim=True),
)


def choose_faults(names: str | None) -> tuple[SoakFault, ...]:
    """The faults named (comma-separated, in that order), or all of them."""
    if not names:
        return FAULTS
    by_name = {f.name: f for f in FAULTS}
    unknown = [n for n in names.split(",") if n not in by_name]
    if unknown:
        raise ValueError(f"unknown faults {unknown}; known: {', '.join(by_name)}")
    return tuple(by_name[n] for n in names.split(","))


@dataclass
class FaultLog:
    """The faults of one soak, injected in rotation: the ``n``-th is ``faults[n % len]``,
    given its own class's count (so targets rotate within a class)."""

    ctx: FaultContext
    faults: tuple[SoakFault, ...]
    recover_s: float = 60.0
    entries: list[dict[str, Any]] = field(default_factory=list)
    _counts: dict[str, int] = field(default_factory=dict)

    async def inject_next(self, now_s: Callable[[], float]) -> dict[str, Any]:
        fault = self.faults[len(self.entries) % len(self.faults)]
        number = self._counts.get(fault.name, 0)
        self._counts[fault.name] = number + 1
        entry: dict[str, Any] = {"t_s": round(now_s(), 2), "fault": fault.name}
        try:
            entry["target"] = await asyncio.wait_for(fault.inject(self.ctx, number), 120.0)
        except _FAILURES as exc:
            entry["error"] = repr(exc)[:300]
        entry["injected_s"] = round(now_s() - entry["t_s"], 2)
        entry |= await self.heal()
        entry["healed_s"] = round(now_s() - entry["t_s"], 2)
        self.entries.append(entry)
        return entry

    async def heal(self) -> dict[str, Any]:
        """Resume, restart what died, wait for a full ISR; what was found."""
        started = time.monotonic()
        crashed = await asyncio.to_thread(self.ctx.cluster.revive)
        full = await wait_full_isr(self.ctx.cluster, self.ctx.topic, self.recover_s)
        return {
            "crashed": crashed,
            "full_isr": full,
            "isr_wait_s": round(time.monotonic() - started, 2),
        }
