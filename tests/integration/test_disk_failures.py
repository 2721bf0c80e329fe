"""A broker's data folder fails under load, on a real cluster (etcd, a coordinator, three
brokers as processes; RF 3, ``min.insync.replicas`` 2, idempotent acks=all producers).

- **A full disk**: broker 2 runs under the chaos kit's LD_PRELOAD shim (``loadtest/chaos/
  shim.c``), which makes every write under its data folder fail with ``ENOSPC`` while filled —
  the way a size-limited file system answers, without root or a mount. Writes to the
  partition it led succeed again within 10 s through another leader, nothing acknowledged is
  lost, moved or duplicated, and once space is back the broker rejoins the ISR.
- **Bit rot**: one byte flipped in a sealed segment of a partition's leader. A reader that
  starts at offset 0 gets every acknowledged record intact (the damaged batch is never
  served: a retriable error, then the new leader's copy), and the damaged replica, truncated
  and fetched again, is back in the ISR; read again afterwards, everything is still intact.

One cluster for the module.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from loadtest.chaos.shim import Shim, build_shim
from loadtest.local_cluster import (
    IdempotentProducer,
    LocalCluster,
    local_cluster,
    read_partition,
    wait_for,
)
from yak.clients.admin import AdminClient
from yak.clients.broker import BrokerClient
from yak.errors import YakError
from yak.etcd_server import EmbeddedEtcd
from yak.record import iter_records
from yak.record.batch_header import iter_batches

pytestmark = pytest.mark.integration

FULL = 2  # the broker whose disk fills up


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Shim:
    folder = tmp_path_factory.mktemp("disk-shim").resolve()
    return Shim(build_shim(folder), folder / "control")


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd, shim: Shim
) -> Iterator[LocalCluster]:
    folder = tmp_path_factory.mktemp("disks").resolve()
    with local_cluster(folder, etcd, f"df-{uuid.uuid4().hex[:8]}", brokers=FULL) as running:
        shim.full_dir = folder / f"broker-{FULL}"
        env: dict[str, Any] = dict(shim.env())  # YAK_* and the shim's variables
        running.start_broker(FULL, **env)
        yield running


@pytest.fixture
async def admin(cluster: LocalCluster) -> AsyncIterator[AdminClient]:
    async with AdminClient(cluster.coordinator_url) as client:
        yield client


async def _leader(admin: AdminClient, producer: IdempotentProducer) -> int:
    described = await admin.describe_topic(producer.topic)
    return described.partitions[producer.partition].leader


async def test_a_full_disk_moves_leadership_and_loses_nothing(
    cluster: LocalCluster, admin: AdminClient, shim: Shim
) -> None:
    topic = f"full-{uuid.uuid4().hex[:6]}"
    await admin.create_topic(
        topic, partitions=3, replication_factor=3, configs={"min.insync.replicas": "2"}
    )
    described = await wait_for(admin, topic, "full-isr")
    led = [p.partition for p in described.partitions if p.leader == FULL]
    assert led, f"broker {FULL} leads no partition of {topic}"
    producer = IdempotentProducer(cluster, admin, topic, led[0], producer_id=9_100)
    try:
        for _ in range(20):
            await producer.send_one()
        shim.fill()  # the broker sees it within 50 ms: the next writes fail on its disk
        filled_at = time.monotonic()
        while await _leader(admin, producer) in (FULL, -1):
            await producer.send_one()  # retried (retriable errors) until acknowledged
            assert time.monotonic() - filled_at < 10, f"still led by {FULL}: {producer.errors}"
        await producer.send_one()  # acks=all through the new leader
        moved_s = time.monotonic() - filled_at
        print(f"disk full -> acks=all write through a new leader: {moved_s:.2f} s")
        assert moved_s < 10
        for _ in range(20):
            await producer.send_one()
        shim.free()
        await wait_for(admin, topic, "full-isr", timeout_s=30)  # back in every ISR
        for _ in range(5):
            await producer.send_one()
    finally:
        shim.free()
    assert "KAFKA_STORAGE_ERROR" in producer.errors or "NOT_LEADER_OR_FOLLOWER" in producer.errors
    log = (cluster.folder / "logs" / f"broker-{FULL}.log").read_text()
    assert "data folder offline" in log
    assert "registration: offline data folders none" in log  # cleared when space came back

    described = await wait_for(admin, topic, "full-isr")
    leader = described.partitions[led[0]].leader
    async with BrokerClient(cluster.broker_url(leader)) as client:
        stored = await read_partition(client, topic, led[0])
    values = [value for _, value in stored]
    assert len(values) == len(set(values)), "a record was stored twice"
    position = {value: offset for offset, value in stored}
    for ack in producer.acks:
        assert position.get(ack.value) == ack.offset, f"acknowledged {ack.value!r} lost or moved"
    await producer.aclose()


async def _read_all(
    cluster: LocalCluster,
    admin: AdminClient,
    topic: str,
    end: int,
    errors: list[str],
    timeout_s: float = 30.0,
) -> list[tuple[int, bytes]]:
    """Every record of ``topic``-0 below ``end``, as a consumer reads it: from the leader of
    the moment, retrying retriable errors (their codes added to ``errors``) after a metadata
    refresh; a non-retriable error fails the read."""
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < end:
        assert time.monotonic() < deadline, f"read stuck at offset {len(out)}"
        leader = (await admin.describe_topic(topic)).partitions[0].leader
        if leader < 0:
            await asyncio.sleep(0.1)  # an election in another process
            continue
        try:
            async with BrokerClient(cluster.broker_url(leader)) as client:
                fetched = await client.fetch_one(topic, 0, len(out), max_wait_ms=0)
        except YakError as exc:
            if not exc.retriable:
                raise
            errors.append(exc.code)
            await asyncio.sleep(0.1)
            continue
        out += [(r.offset, bytes(r.value or b"")) for r in iter_records(fetched.records)]
    return out


async def test_a_flipped_byte_in_a_leaders_sealed_segment_is_never_served_and_repaired(
    cluster: LocalCluster, admin: AdminClient
) -> None:
    topic = f"rot-{uuid.uuid4().hex[:6]}"
    await admin.create_topic(
        topic,
        partitions=1,
        replication_factor=3,
        configs={"min.insync.replicas": "2", "segment.bytes": "4096"},
    )
    await wait_for(admin, topic, "full-isr")
    producer = IdempotentProducer(cluster, admin, topic, 0, producer_id=9_200, value_size=64)
    for _ in range(150):
        await producer.send_one()
    await producer.aclose()
    acked = [(ack.offset, ack.value) for ack in producer.acks]
    described = await wait_for(admin, topic, "full-isr")
    victim, epoch = described.partitions[0].leader, described.partitions[0].leader_epoch

    folder = cluster.folder / f"broker-{victim}" / f"{topic}-0"
    segments = sorted(folder.glob("*.log"))
    assert len(segments) > 2, "expected sealed segments"
    sealed = segments[0]
    data = bytearray(sealed.read_bytes())
    batches = list(iter_batches(data))
    position, header = batches[len(batches) // 2]
    data[position + header.size - 3] ^= 0x40  # inside a record: under the CRC
    sealed.write_bytes(bytes(data))

    errors: list[str] = []
    assert await _read_all(cluster, admin, topic, len(acked), errors) == acked
    print("bit rot: errors a reader met:", errors)
    assert "KAFKA_STORAGE_ERROR" in errors  # the damaged leader's answer, before it gave up
    after = (await admin.describe_topic(topic)).partitions[0]
    assert after.leader_epoch > epoch  # the damaged leader gave the partition up
    log = (cluster.folder / "logs" / f"broker-{victim}.log").read_text()
    assert "damaged batch at offset" in log
    assert "before its damaged batch, to fetch it again" in log
    await wait_for(admin, topic, "full-isr", timeout_s=30)  # the repaired replica is back
    assert await _read_all(cluster, admin, topic, len(acked), []) == acked
