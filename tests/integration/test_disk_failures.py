"""A broker's data folder fails under load, on a real cluster (etcd, a coordinator, three
brokers as processes; RF 3, ``min.insync.replicas`` 2, idempotent acks=all producers).

- **A full disk**: broker 2 runs under the chaos kit's LD_PRELOAD shim (``loadtest/chaos/
  shim.c``), which makes every write under its data folder fail with ``ENOSPC`` while filled —
  the way a size-limited file system answers, without root or a mount. Writes to the
  partition it led succeed again within 10 s through another leader, nothing acknowledged is
  lost, moved or duplicated, and once space is back the broker rejoins the ISR.

One cluster for the module.
"""

from __future__ import annotations

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
from yak.etcd_server import EmbeddedEtcd

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
