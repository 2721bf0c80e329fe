"""The disk fault classes: a full disk and bit rot (issue 34).

- ``disk-full``: the disk of partition ``number % 3``'s leader — each broker's data folder
  is a 1 GiB tmpfs the run mounts (``disks``) — filled for 2 / 5 / 8 s, then emptied. Where
  the disks cannot be mounted (not root), the LD_PRELOAD shim's full disk for broker-2
  instead (``shim.c``: every write under its folder answers ``ENOSPC``). The broker should
  answer ``KAFKA_STORAGE_ERROR``, take the folder offline, the controller move its
  leaderships, and the broker come back into the ISRs once the space is back.
- ``bit-rot``: one bit flipped inside a record of a batch in a sealed segment of partition
  ``number % 3``: of its leader on even faults, of a follower on odd ones — then put first
  in the partition's replicas (a reassignment that moves nothing), so that the preferred
  leader election makes it lead — and the partition is read from offset 0 like a consumer
  would. The damaged batch must never be served and the damaged replica must be repaired
  from an in-sync copy (truncated, fetched again).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from loadtest.chaos.workload import read_topic
from loadtest.local_cluster import read_partition
from yak.clients.broker import BrokerClient
from yak.errors import YakError
from yak.record.batch_header import iter_batches

if TYPE_CHECKING:
    from loadtest.chaos.faults import FaultContext

__all__ = ["bit_rot", "disk_full", "flip_sealed_batch"]

_FULL_HOLDS = (2.0, 5.0, 8.0)


async def disk_full(ctx: FaultContext, number: int) -> str:
    """The disk of partition ``number % 3``'s leader filled for 2/5/8 s (each leader gets
    every hold), then emptied; without mounted disks, the shim broker's for the same holds."""
    hold = _FULL_HOLDS[number // 3 % 3]
    disks = ctx.cluster.disks
    if disks is None:
        assert ctx.shim is not None
        ctx.shim.fill()
        try:
            await asyncio.sleep(hold)
        finally:
            ctx.shim.free()
        return f"{ctx.cluster.shim_broker} full {hold:.0f}s (shim)"
    described = await ctx.cluster.describe(ctx.topic)
    partition = described.partitions[number % len(described.partitions)]
    node = f"broker-{partition.leader if partition.leader >= 0 else partition.replicas[0]}"
    await asyncio.to_thread(disks.fill, node)
    try:
        await asyncio.sleep(hold)
    finally:
        disks.free(node)
    return f"{node} full {hold:.0f}s"


def flip_sealed_batch(folder: Path, number: int) -> int | None:
    """Flip one bit inside a record of a batch of a sealed segment (every ``.log`` but the
    newest) of the partition log in ``folder``: segment and batch chosen by ``number``; the
    damaged batch's base offset, or None without a sealed segment holding a batch."""
    sealed = sorted(folder.glob("*.log"))[:-1]
    if not sealed:
        return None
    segment = sealed[number % len(sealed)]
    data = bytearray(segment.read_bytes())
    batches = list(iter_batches(data, check_crc=False))
    if not batches:
        return None
    position, header = batches[(number * 7919) % len(batches)]
    data[position + header.size - 1] ^= 0x40  # the last record's last byte: under the CRC
    segment.write_bytes(bytes(data))
    return header.base_offset


async def bit_rot(ctx: FaultContext, number: int) -> str:
    """A bit flipped in a sealed segment of a leader (even) or of a follower (odd faults),
    which is then made to lead; then the partition read from 0."""
    described = await ctx.cluster.describe(ctx.topic)
    partition = described.partitions[number % len(described.partitions)]
    leader = partition.leader if partition.leader >= 0 else partition.replicas[0]
    followers = [r for r in partition.replicas if r != leader]
    target = followers[number // 2 % len(followers)] if number % 2 and followers else leader
    role = "leader" if target == leader else "follower"
    folder = ctx.cluster.data_dir(f"broker-{target}") / f"{ctx.topic}-{partition.partition}"
    offset = flip_sealed_batch(folder, number)
    for _ in range(20):  # the class's first faults may come before the first roll
        if offset is not None:
            break
        await asyncio.sleep(0.5)  # files another process writes: nothing to wait on
        offset = flip_sealed_batch(folder, number)
    if offset is None:
        return f"broker-{target} ({role}): no sealed segment within 10 s"
    led = role == "leader" or await _make_lead(ctx, partition.partition, target)
    # A reader from 0 meets the damage on the leader at once (before a preferred leader
    # election moves the partition back to a restarted broker), then the whole topic.
    met = await _read_from_leader(ctx, partition.partition)
    await read_topic(ctx.cluster, ctx.topic)
    seen = f", read met {'+'.join(met)}" if met else ""
    return f"broker-{target} ({role}{'' if led else ', never led'}{seen}) offset {offset}"


async def _read_from_leader(ctx: FaultContext, partition: int) -> list[str]:
    """Read ``partition`` from 0 at its leader of the moment, retrying (20 times, 0.5 s
    apart) what fails; the errors met, in order."""
    met: list[str] = []
    for _ in range(20):
        leader = (await ctx.cluster.describe(ctx.topic)).partitions[partition].leader
        try:
            if leader < 0:
                raise RuntimeError("no leader")
            async with BrokerClient(ctx.cluster.broker_url(leader), timeout_s=10.0) as client:
                await read_partition(client, ctx.topic, partition)
            return met
        except YakError as exc:
            met.append(exc.code)
        except (OSError, httpx.HTTPError, RuntimeError) as exc:
            met.append(type(exc).__name__)
        await asyncio.sleep(0.5)
    return met


async def _make_lead(ctx: FaultContext, partition: int, target: int) -> bool:
    """Put ``target`` first in ``partition``'s replicas, so that the preferred leader
    election makes it lead; whether it leads within 10 s."""
    state = (await ctx.cluster.describe(ctx.topic)).partitions[partition]
    order = [target, *(r for r in state.replicas if r != target)]
    await ctx.cluster.reorder_replicas(ctx.topic, partition, order)
    for _ in range(100):  # the election happens in other processes
        if (await ctx.cluster.describe(ctx.topic)).partitions[partition].leader == target:
            return True
        await asyncio.sleep(0.1)
    return False
