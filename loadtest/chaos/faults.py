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
from loadtest.chaos.disk_faults import bit_rot, disk_full
from loadtest.chaos.network import Degradation, Network
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
    #: The brokers' data folders on size-limited file systems (``disks``).
    disks: bool = False
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


def coordinator_target(number: int, controller: str | None) -> str:
    """The coordinator the ``number``-th fault hits: the active controller on even faults
    (when one is known), the standby on odd ones; without a known controller, alternate."""
    if controller not in COORDINATORS:
        return COORDINATORS[number % 2]
    if number % 2 == 0:
        return controller
    return next(c for c in COORDINATORS if c != controller)


async def _coordinator(ctx: FaultContext, number: int) -> tuple[str, str]:
    """The coordinator to hit and how it stood (``active``, ``standby`` or ``unknown``)."""
    controller = await ctx.cluster.controller()
    target = coordinator_target(number, controller)
    role = "unknown" if controller is None else "active" if target == controller else "standby"
    return target, role


async def kill_coordinator(ctx: FaultContext, number: int) -> str:
    """kill -9 the active controller (even faults) or the standby, restart it 0.3 s later."""
    node, role = await _coordinator(ctx, number)
    return f"{await _kill_restart(ctx, node, 0.3)} ({role})"


async def pause_coordinator(ctx: FaultContext, number: int) -> str:
    """SIGSTOP the active controller (even faults) or the standby for 0.5/1.5/3 s."""
    node, role = await _coordinator(ctx, number)
    return f"{await _pause(ctx, node, _HOLDS[number // 2 % 3])} ({role})"


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


def etcd_target(number: int, leader: str | None, members: tuple[str, ...] = ETCD_MEMBERS) -> str:
    """The etcd member the ``number``-th etcd fault hits: the raft leader every third fault
    (``number % 3 == 0``), otherwise its first or second follower (by name); with no leader
    known (an election under way), member ``number % 3``."""
    if leader not in members:
        return members[number % len(members)]
    if number % 3 == 0:
        return leader
    followers = [m for m in members if m != leader]
    return followers[(number % 3 - 1) % len(followers)]


async def _etcd_target(ctx: FaultContext, number: int) -> tuple[str, str]:
    """The member to hit and how it stood (``leader``, ``follower`` or ``unknown``). Right
    after a cut heals an election may be under way (etcd 3.4 runs without pre-vote: the member
    that was cut off comes back with a higher term and unseats the leader): the leader is
    looked up again for up to 5 s before the fault goes ahead without one."""
    deadline = asyncio.get_running_loop().time() + 5.0
    leader = await ctx.cluster.etcd_leader()
    while leader is None and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.2)
        leader = await ctx.cluster.etcd_leader()
    target = etcd_target(number, leader)
    role = "unknown" if leader is None else "leader" if target == leader else "follower"
    return target, role


_ETCD_HOLDS = (0.5, 1.5, 3.0, 6.0)


def etcd_pause_hold(number: int) -> float:
    """Each role (``number % 3``) gets every hold in turn (``number // 3``)."""
    return _ETCD_HOLDS[number // 3 % len(_ETCD_HOLDS)]


async def pause_etcd(ctx: FaultContext, number: int) -> str:
    """SIGSTOP an etcd member (the raft leader a third of the time), then SIGCONT: a leader
    paused past the election timeout (1 s) is replaced, and comes back a stale leader that
    steps down; services on the paused member must leave it (reads, writes, keep-alives)."""
    member, role = await _etcd_target(ctx, number)
    hold = etcd_pause_hold(number)
    ctx.cluster.pause(member)
    await asyncio.sleep(hold)
    ctx.cluster.resume(member)
    return f"{member} ({role}) {hold:.1f}s"


async def partition_etcd_member(ctx: FaultContext, number: int) -> str:
    """Cut one etcd member (the raft leader a third of the time) from the two others only:
    it stays reachable to every service but cannot reach a quorum, so it serves no
    linearizable read, write or lease keep-alive; a cut leader steps down (check quorum)."""
    member, role = await _etcd_target(ctx, number)
    hold = _hold(number)
    await _isolate(ctx, member, ETCD_MEMBERS, hold)
    return f"{member} ({role}) {hold:.0f}s"


#: What a one-way fault cuts a leader from, in turn.
ONE_WAY_GROUPS = ("etcd", "followers", "proxies")
#: ``out``: the leader's packets to the group are dropped; ``in``: the group's to the leader.
ONE_WAY_DIRECTIONS = ("out", "in")


def one_way_plan(number: int) -> tuple[int, str, str, float]:
    """The ``number``-th one-way fault: the partition whose leader is cut, the group, the
    direction, the hold. Partition ``number % 3``, group ``number // 3 % 3``, direction
    ``number % 2`` (every leader and group meets both directions within 18 faults), hold
    ``number // 9 % 3``."""
    return (
        number % 3,
        ONE_WAY_GROUPS[number // 3 % 3],
        ONE_WAY_DIRECTIONS[number % 2],
        _CUT_HOLDS[number // 9 % 3],
    )


async def _drop_one_way(
    ctx: FaultContext, node: str, others: tuple[str, ...], direction: str, hold_s: float
) -> str:
    """Drop ``node``'s packets to each of ``others`` (``out``) or theirs to it (``in``) for
    ``hold_s``, then heal; the arrow that shows the direction in the report."""
    for other in others:
        if other == node:
            continue
        if direction == "out":
            ctx.network.drop_one_way(node, other)
        else:
            ctx.network.drop_one_way(other, node)
    await asyncio.sleep(hold_s)
    ctx.network.heal_all()
    return "->" if direction == "out" else "<-"


async def one_way(ctx: FaultContext, number: int) -> str:
    """A leader's packets to every etcd member, to its followers or to both proxies dropped
    while theirs still reach it (``out``), or theirs to it dropped while its still reach them
    (``in``); each drop at the receiver's input: requests arrive and answers vanish, or the
    other way round."""
    _, group, direction, hold = one_way_plan(number)
    leader = await _leader(ctx, number)
    if group == "etcd":
        targets: tuple[str, ...] = ETCD_MEMBERS
    elif group == "followers":
        targets = tuple(b for b in BROKERS if b != leader)
    else:
        targets = PROXIES
    arrow = await _drop_one_way(ctx, leader, targets, direction, hold)
    return f"{leader} {arrow} {group} {hold:.0f}s"


#: What a control-plane one-way fault cuts, in turn: an etcd member from the two others, or
#: the active controller from every etcd member.
CONTROL_SUBJECTS = ("etcd-member", "controller")


def one_way_control_plan(number: int) -> tuple[str, str, float]:
    """The ``number``-th control-plane one-way fault: the subject (``number // 2 % 2``), the
    direction (``number % 2``), the hold (``number // 4 % 3``): every subject meets both
    directions with every hold within 12 faults."""
    return (
        CONTROL_SUBJECTS[number // 2 % 2],
        ONE_WAY_DIRECTIONS[number % 2],
        _CUT_HOLDS[number // 4 % 3],
    )


async def _active_controller(ctx: FaultContext) -> str | None:
    """The active controller, looked up again for up to 5 s while there is none (the last
    fault's controller may have just lost its lease and the standby not yet won)."""
    deadline = asyncio.get_running_loop().time() + 5.0
    controller = await ctx.cluster.controller()
    while controller is None and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.2)
        controller = await ctx.cluster.controller()
    return controller


async def one_way_control(ctx: FaultContext, number: int) -> str:
    """One way of the control plane's links dropped: an etcd member's packets to the two
    others (``out``: a leader's heartbeats and a follower's answers vanish while it still
    hears them) or theirs to it (``in``); or the active controller's packets to every etcd
    member (``out``: its lease keep-alives never arrive) or etcd's to it (``in``: its
    keep-alives and writes arrive and are applied, the answers vanish, so it must step down
    on its own clock while etcd still counts its lease)."""
    subject, direction, hold = one_way_control_plan(number)
    if subject == "etcd-member":
        node, role = await _etcd_target(ctx, number)
    else:
        controller = await _active_controller(ctx)
        node = controller if controller is not None else coordinator_target(number, None)
        role = "active" if controller is not None else "unknown"
    arrow = await _drop_one_way(ctx, node, ETCD_MEMBERS, direction, hold)
    peers = "etcd peers" if subject == "etcd-member" else "etcd"
    return f"{node} ({role}) {arrow} {peers} {hold:.0f}s"


#: netem's ``delay 50ms 20ms loss 5%`` and a harsher step.
NETEM_STEPS = (Degradation(50, 20, 0.05), Degradation(200, 50, 0.15))
_NETEM_HOLDS = (2.0, 4.0, 6.0)


def netem_plan(number: int) -> tuple[int, Degradation, float]:
    """The ``number``-th netem fault: partition ``number % 3``'s leader, step ``number // 3 %
    2``, hold ``number // 6 % 3`` (every leader gets every step with every hold)."""
    step = NETEM_STEPS[number // 3 % len(NETEM_STEPS)]
    return number % 3, step, _NETEM_HOLDS[number // 6 % len(_NETEM_HOLDS)]


async def netem(ctx: FaultContext, number: int) -> str:
    """Delay, jitter and loss on every packet of a leader's link, both ways (see
    ``delayer``), for 2/4/6 s, then removed."""
    _, step, hold = netem_plan(number)
    leader = await _leader(ctx, number)
    await asyncio.to_thread(ctx.network.degrade, leader, step, hold + 10.0)
    await asyncio.sleep(hold)
    await asyncio.to_thread(ctx.network.heal_all)
    return f"{leader} {step} {hold:.0f}s"


CLASSES = (
    FaultClass("kill-broker", "kill -9 a partition leader, restart it on its folder", kill_broker),
    FaultClass("pause-broker", "SIGSTOP a leader 0.5/1.5/3 s, SIGCONT", pause_broker),
    FaultClass("kill-proxy", "kill -9 a rest-proxy, restart it", kill_proxy),
    FaultClass("pause-proxy", "SIGSTOP a rest-proxy 0.5/1.5/3 s, SIGCONT", pause_proxy),
    FaultClass(
        "kill-coordinator",
        "kill -9 a coordinator (the active controller every other fault), restart it",
        kill_coordinator,
    ),
    FaultClass(
        "pause-coordinator",
        "SIGSTOP a coordinator (the active controller every other fault) 0.5/1.5/3 s",
        pause_coordinator,
    ),
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
        "pause-etcd",
        "SIGSTOP an etcd member (the raft leader 1 in 3) 0.5/1.5/3/6 s, SIGCONT",
        pause_etcd,
    ),
    FaultClass(
        "partition-etcd-member",
        "an etcd member (the raft leader 1 in 3) cut from the other two 1/3/5 s",
        partition_etcd_member,
        partitions=True,
    ),
    FaultClass(
        "one-way",
        "a leader's packets to etcd / its followers / the proxies dropped, theirs kept, or the "
        "other way round, 1/3/5 s",
        one_way,
        partitions=True,
    ),
    FaultClass(
        "one-way-control",
        "an etcd member's packets to the two others dropped, or theirs to it; or the active "
        "controller's to etcd, or etcd's to it; 1/3/5 s",
        one_way_control,
        partitions=True,
    ),
    FaultClass(
        "netem",
        "a leader's link delayed 50±20 ms with 5% loss, or 200±50 ms with 15%, 2/4/6 s",
        netem,
        partitions=True,
    ),
    FaultClass(
        "disk-full",
        "a leader's disk (a 1 GiB tmpfs) filled for 2/5/8 s, then emptied",
        disk_full,
        shim=True,  # the fallback where the disks cannot be mounted
        disks=True,
    ),
    FaultClass(
        "bit-rot",
        "a bit flipped in a sealed segment of a leader, or of a follower made to lead; the "
        "partition read from 0",
        bit_rot,
        topic_configs=(("segment.bytes", "8192"),),  # sealed segments within a second
    ),
    FaultClass(
        "empty-disk",
        "wipe a leader's data folder; or a follower's, then kill -9 the leader",
        empty_disk,
    ),
)
