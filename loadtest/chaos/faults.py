"""The nemesis: one class of fault per phase, each fault injected, held and healed.

A fault class is a name, a one-line description, what it needs (network namespaces, the
shim) and ``inject(ctx, number)``: do the ``number``-th fault *and undo it* (restart, resume,
heal, reset), returning a note for the report. Targets rotate: partition ``number % 3``'s
current leader, proxy ``number % 2``, and so on; hold times cycle (``number // 3`` where the
target is ``number % 3``, so every target gets every hold) through short and long
(longer than the 2 s broker lease, so some pauses and cuts cost a broker its registration and
its leaderships while it still believes it leads). After each fault the runner revives what
crashed, heals every cut and waits for a full ISR before the next one.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from loadtest.chaos.cluster import BROKERS, COORDINATORS, ETCD_MEMBERS, PROXIES, ChaosCluster
from loadtest.chaos.network import Network
from loadtest.chaos.shim import Shim

__all__ = ["CLASSES", "FaultClass", "FaultContext"]


@dataclass
class FaultContext:
    cluster: ChaosCluster
    network: Network
    topic: str
    shim: Shim | None


Inject = Callable[[FaultContext, int], Awaitable[str]]


@dataclass(frozen=True)
class FaultClass:
    name: str
    description: str
    inject: Inject
    partitions: bool = False
    shim: bool = False
    #: Configs of the class's topic besides RF 3 and ``min.insync.replicas`` 2.
    topic_configs: tuple[tuple[str, str], ...] = ()


async def _leader(ctx: FaultContext, number: int) -> str:
    """The broker node leading partition ``number % 3`` of the phase's topic."""
    described = await ctx.cluster.describe(ctx.topic)
    partition = described.partitions[number % len(described.partitions)]
    leader = partition.leader if partition.leader >= 0 else partition.replicas[0]
    return f"broker-{leader}"


async def _restart(ctx: FaultContext, node: str) -> None:
    await asyncio.to_thread(ctx.cluster.start, node)


async def _kill_restart(ctx: FaultContext, node: str, down_s: float) -> str:
    ctx.cluster.kill(node)
    await asyncio.sleep(down_s)
    await _restart(ctx, node)
    return node


async def _pause(ctx: FaultContext, node: str, hold_s: float) -> str:
    ctx.cluster.pause(node)
    await asyncio.sleep(hold_s)
    ctx.cluster.resume(node)
    return f"{node} {hold_s:.1f}s"


_HOLDS = (0.5, 1.5, 3.0)


async def kill_broker(ctx: FaultContext, number: int) -> str:
    return await _kill_restart(ctx, await _leader(ctx, number), 0.3)


async def pause_broker(ctx: FaultContext, number: int) -> str:
    return await _pause(ctx, await _leader(ctx, number), _HOLDS[number // 3 % 3])


async def kill_proxy(ctx: FaultContext, number: int) -> str:
    return await _kill_restart(ctx, PROXIES[number % 2], 0.3)


async def pause_proxy(ctx: FaultContext, number: int) -> str:
    return await _pause(ctx, PROXIES[number % 2], _HOLDS[number % 3])


async def kill_coordinator(ctx: FaultContext, number: int) -> str:
    return await _kill_restart(ctx, COORDINATORS[number % 2], 0.3)


async def pause_coordinator(ctx: FaultContext, number: int) -> str:
    return await _pause(ctx, COORDINATORS[number % 2], _HOLDS[number % 3])


async def kill_etcd(ctx: FaultContext, number: int) -> str:
    """kill -9 an etcd member and restart it on its data folder. Services are given all
    three members (``YAK_ETCD=a,b,c``) and fail over; with ``--etcd-single`` they get member
    0's alone, and only members 1 and 2 are killed (either may be etcd's leader)."""
    members = ETCD_MEMBERS if ctx.cluster.etcd_list else ETCD_MEMBERS[1:]
    return await _kill_restart(ctx, members[number % len(members)], 1.0)


async def _wipe(ctx: FaultContext, node: str) -> None:
    ctx.cluster.kill(node)
    shutil.rmtree(ctx.cluster.data_dir(node), ignore_errors=True)
    await asyncio.sleep(0.3)
    await _restart(ctx, node)


async def empty_disk(ctx: FaultContext, number: int) -> str:
    """A disk replaced under a broker that keeps its id: kill -9, delete its whole data
    folder, start it again. Even faults wipe a partition's leader; odd ones wipe one of its
    followers and, the moment that broker is back (registered, maybe still counted in the
    ISR with an empty log), kill -9 the leader too — the race where an empty replica could
    be elected."""
    leader = await _leader(ctx, number)
    if number % 2 == 0:
        await _wipe(ctx, leader)
        return f"leader {leader}"
    described = await ctx.cluster.describe(ctx.topic)
    partition = described.partitions[number % len(described.partitions)]
    follower = next(f"broker-{r}" for r in partition.replicas if f"broker-{r}" != leader)
    await _wipe(ctx, follower)
    await _kill_restart(ctx, leader, 0.3)
    return f"follower {follower}, then leader"


_DISK = ((5_000, 100_000), (20_000, 300_000), (50_000, 1_000_000))


async def slow_disk(ctx: FaultContext, number: int) -> str:
    """The shim broker's writes and fsyncs to files slowed for 3 s (see ``shim``)."""
    assert ctx.shim is not None
    write_us, fsync_us = _DISK[number % 3]
    ctx.shim.set(write_delay_us=write_us, fsync_delay_us=fsync_us)
    await asyncio.sleep(3.0)
    ctx.shim.reset()
    return f"{ctx.cluster.shim_broker} write {write_us // 1000} ms fsync {fsync_us // 1000} ms"


_JUMPS_MS = (30_000, -30_000, 600_000, -600_000, 3_600_000, -3_600_000, 86_400_000, -86_400_000)


async def clock_jump(ctx: FaultContext, number: int) -> str:
    """The shim broker's wall clock stepped by ±30 s .. ±1 day for 2 s, then back (two
    steps; monotonic clocks untouched, as an NTP step)."""
    assert ctx.shim is not None
    offset = _JUMPS_MS[number % len(_JUMPS_MS)]
    ctx.shim.jump(offset)
    await asyncio.sleep(2.0)
    ctx.shim.jump(0)
    return f"{ctx.cluster.shim_broker} {offset // 1000:+d}s"


async def _isolate(ctx: FaultContext, node: str, others: tuple[str, ...], hold_s: float) -> str:
    for other in others:
        if other != node:
            ctx.network.cut(node, other)
    await asyncio.sleep(hold_s)
    ctx.network.heal_all()
    return f"{node} {hold_s:.0f}s"


_CUT_HOLDS = (1.0, 3.0, 5.0)


def _hold(number: int) -> float:
    """The hold of the ``number``-th cut: each leader (``number % 3``) gets every hold in
    turn (``number // 3``), not always the same one."""
    return _CUT_HOLDS[number // 3 % 3]


async def leader_from_etcd(ctx: FaultContext, number: int) -> str:
    return await _isolate(ctx, await _leader(ctx, number), ETCD_MEMBERS, _hold(number))


async def leader_from_followers(ctx: FaultContext, number: int) -> str:
    return await _isolate(ctx, await _leader(ctx, number), BROKERS, _hold(number))


async def leader_from_proxies(ctx: FaultContext, number: int) -> str:
    return await _isolate(ctx, await _leader(ctx, number), PROXIES, _hold(number))


CLASSES = (
    FaultClass("kill-broker", "kill -9 a partition leader, restart it on its folder", kill_broker),
    FaultClass("pause-broker", "SIGSTOP a leader 0.5/1.5/3 s, SIGCONT", pause_broker),
    FaultClass("kill-proxy", "kill -9 a rest-proxy, restart it", kill_proxy),
    FaultClass("pause-proxy", "SIGSTOP a rest-proxy 0.5/1.5/3 s, SIGCONT", pause_proxy),
    FaultClass("kill-coordinator", "kill -9 a coordinator, restart it", kill_coordinator),
    FaultClass("pause-coordinator", "SIGSTOP a coordinator 0.5/1.5/3 s", pause_coordinator),
    FaultClass("kill-etcd", "kill -9 an etcd member, restart it on its folder", kill_etcd),
    FaultClass(
        "slow-disk",
        "a broker's file writes and fsyncs slowed for 3 s (flush.mode=sync)",
        slow_disk,
        shim=True,
        topic_configs=(("flush.mode", "sync"),),  # fsyncs on the acknowledgement's path
    ),
    FaultClass("clock-jump", "a broker's wall clock stepped ±30 s..±1 day", clock_jump, shim=True),
    FaultClass(
        "partition-leader-etcd",
        "a leader cut from every etcd member 1/3/5 s",
        leader_from_etcd,
        partitions=True,
    ),
    FaultClass(
        "partition-leader-followers",
        "a leader cut from the other brokers 1/3/5 s",
        leader_from_followers,
        partitions=True,
    ),
    FaultClass(
        "partition-leader-proxies",
        "a leader cut from both rest-proxies 1/3/5 s",
        leader_from_proxies,
        partitions=True,
    ),
    FaultClass(
        "empty-disk",
        "wipe a leader's data folder; or a follower's, then kill -9 the leader",
        empty_disk,
    ),
)
