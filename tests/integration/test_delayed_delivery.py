"""Delayed and scheduled delivery on a real cluster: etcd, two coordinators, three brokers and a
rest-proxy as processes; topics with ``delayed.delivery.enable=true`` at RF 3.

- Records produced with ``deliver_after_ms`` (the SDK) are listed through the proxy from the
  leader's delay index; after kill -9 of the leader the new leader (a former follower, which
  built its own index) lists the same pending records, minus one cancelled before the kill.
- A delay to a topic without delays is 400 ``DELAYS_NOT_ENABLED``; bad delays are 400
  ``INVALID_DELAY`` naming the rule; neither writes anything (the end offset stays).
- A share group does not get a delayed record before its time and gets it within
  ``TOLERANCE_MS`` after; a publish-subscribe read sees it at its offset at once, with its header.
- Delayed records survive kill -9 of the partition leader and of the active coordinator and a
  restart of the proxy: delivered once each, after their time.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from loadtest.local_cluster import LocalCluster, local_cluster
from yak.delays import DELIVER_AT_HEADER
from yak.errors import YakError
from yak.etcd_server import EmbeddedEtcd
from yak.sdk import AsyncProducer
from yak.sdk.admin import AsyncAdmin
from yak.sdk.reader import AsyncPartitionReader
from yak.sdk.share_consumer import AsyncShareConsumer, ShareRecord
from yak.topic_config import DELAYED_DELIVERY_ENABLE, DELAYED_DELIVERY_MAX_MS

pytestmark = pytest.mark.integration

#: How late a share group may get a due record on a loaded CI machine (the driver's timer is
#: set to the next due time; the long poll answers when it fires).
TOLERANCE_MS = 3_000
DELAYED = {DELAYED_DELIVERY_ENABLE: "true", DELAYED_DELIVERY_MAX_MS: "600000"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd) -> Iterator[LocalCluster]:
    folder: Path = tmp_path_factory.mktemp("delays")
    with local_cluster(folder, etcd, f"dd-{uuid.uuid4().hex[:8]}", brokers=3) as running:
        running.start_coordinator(1)
        running.start_proxy(0)
        yield running


@pytest.fixture
async def admin(cluster: LocalCluster) -> AsyncIterator[AsyncAdmin]:
    async with AsyncAdmin(cluster.proxy_url(0)) as client:
        yield client


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def _topic(admin: AsyncAdmin, configs: dict[str, str] | None = None) -> str:
    name = f"delayed-{uuid.uuid4().hex[:8]}"
    await admin.create_topic(name, partitions=1, replication_factor=3, configs=configs)
    return name


async def _produce(url: str, topic: str, delays: list[int | None]) -> list[int]:
    """One record per delay (None: not delayed); their offsets."""
    async with AsyncProducer(url, linger_ms=0) as producer:
        written = [
            await producer.send_and_wait(topic, f"v{i}", deliver_after_ms=delay)
            for i, delay in enumerate(delays)
        ]
    return [w.offset for w in written]


async def _new_leader(admin: AsyncAdmin, topic: str, old: int, timeout_s: float = 30) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leader = (await admin.describe_topic(topic)).partitions[0].leader
        if leader not in (old, -1):
            return leader
        await asyncio.sleep(0.2)  # another process's state: nothing here to wait on
    raise AssertionError(f"{topic}: no new leader within {timeout_s} s")


async def _listed(admin: AsyncAdmin, topic: str, timeout_s: float = 30) -> list[tuple[int, int]]:
    """(offset, deliver_at) pending at the leader, retried while the leader is moving."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            page = await admin.list_scheduled(topic, 0)
            return [(r.offset, r.deliver_at) for r in page.records]
        except YakError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)  # the cluster is electing a leader


async def test_every_replica_indexes_and_a_new_leader_lists_the_same(
    cluster: LocalCluster, admin: AsyncAdmin
) -> None:
    topic = await _topic(admin, DELAYED)
    offsets = await _produce(cluster.proxy_url(0), topic, [300_000, None, 200_000, 100_000])
    assert offsets == [0, 1, 2, 3]
    listed = await _listed(admin, topic)
    assert [offset for offset, _ in listed] == [3, 2, 0]
    cancelled = await admin.cancel_scheduled(topic, 0, 2)
    assert cancelled.deliver_at == dict(listed)[2]
    expected = [(3, dict(listed)[3]), (0, dict(listed)[0])]
    assert await _listed(admin, topic) == expected

    old = (await admin.describe_topic(topic)).partitions[0].leader
    cluster.kill(old)
    try:
        await _new_leader(admin, topic, old)
        assert await _listed(admin, topic) == expected
    finally:
        cluster.start_broker(old)


async def test_refused_delays_write_nothing(cluster: LocalCluster, admin: AsyncAdmin) -> None:
    plain = await _topic(admin)
    delayed = await _topic(admin, {**DELAYED, DELAYED_DELIVERY_MAX_MS: "60000"})
    refusals: list[tuple[str, dict[str, object], int, str, str]] = [
        (plain, {"deliver_after_ms": 1_000}, 400, "DELAYS_NOT_ENABLED", "delayed.delivery"),
        (delayed, {"deliver_after_ms": 60_001}, 400, "INVALID_DELAY", "beyond"),
        (delayed, {"deliver_at": _now_ms() + 120_000}, 400, "INVALID_DELAY", "beyond"),
        (delayed, {"deliver_at": 1_000}, 400, "INVALID_DELAY", "before 2000"),
        (delayed, {"deliver_after_ms": 5, "deliver_at": _now_ms()}, 400, "INVALID_DELAY", "both"),
        (delayed, {"deliver_at": "2026-12-06T10:00:00"}, 400, "INVALID_DELAY", "time zone"),
        (
            delayed,
            {"headers": [{"key": DELIVER_AT_HEADER, "value": "soon"}]},
            400,
            "INVALID_DELAY",
            "ASCII decimal",
        ),
        (delayed, {"deliver_after_ms": -1}, 400, "INVALID_DELAY", "must be >= 0"),
    ]
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as http:
        for topic, fields, status, code, words in refusals:
            body = {"records": [{"value": 1}, {"value": 2, **fields}]}
            answer = await http.post(f"/api/v1/topics/{topic}/records", json=body)
            assert (answer.status_code, answer.json()["code"]) == (status, code), fields
            assert words in answer.json()["message"], answer.json()
    for topic in (plain, delayed):
        assert (await admin.partition_offset(topic, 0, "latest")).offset == 0


async def _acquire_all(
    consumer: AsyncShareConsumer, count: int, timeout_s: float
) -> list[tuple[ShareRecord, int]]:
    """Records and the wall-clock ms each came at, until ``count`` came or the time is out."""
    got: list[tuple[ShareRecord, int]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        for record in await consumer.acquire(timeout_ms=500):
            got.append((record, _now_ms()))
            await record.ack()
    await consumer.flush()
    return got


def _due(record: ShareRecord) -> int:
    value = dict(record.headers)[DELIVER_AT_HEADER]
    assert value is not None
    return int(value)


async def test_a_share_group_gets_a_delayed_record_at_its_time(
    cluster: LocalCluster, admin: AsyncAdmin
) -> None:
    topic = await _topic(admin, DELAYED)
    group = f"g-{uuid.uuid4().hex[:8]}"
    await admin.create_share_group(group, offset_reset="earliest")
    async with AsyncShareConsumer(cluster.proxy_url(0), group, topic) as consumer:
        await _produce(cluster.proxy_url(0), topic, [None, 4_000, None])
        async with AsyncPartitionReader(cluster.proxy_url(0)) as reader:
            read = await reader.read(topic, 0, 0)
        assert [r.offset for r in read.records] == [0, 1, 2]  # pub-sub: at once, in order
        due = int(dict(read.records[1].headers)[DELIVER_AT_HEADER] or b"0")
        assert due > _now_ms()

        first = await _acquire_all(consumer, 2, timeout_s=10)
        assert sorted(r.offset for r, _ in first) == [0, 2]
        assert all(at < due for _, at in first)
        late = await _acquire_all(consumer, 1, timeout_s=30)
        assert [r.offset for r, _ in late] == [1]
        (record, at), *_ = late
        assert _due(record) == due
        assert due <= at <= due + TOLERANCE_MS, f"came {at - due} ms after its time"


async def test_delays_survive_kills_of_leader_coordinator_and_proxy(
    cluster: LocalCluster, admin: AsyncAdmin
) -> None:
    topic = await _topic(admin, DELAYED)
    group = f"g-{uuid.uuid4().hex[:8]}"
    await admin.create_share_group(group, offset_reset="earliest")
    await _produce(cluster.proxy_url(0), topic, [12_000, 12_500, 13_000])
    dues = [d for _, d in sorted(await _listed(admin, topic))]
    assert len(dues) == 3

    leader = (await admin.describe_topic(topic)).partitions[0].leader
    controller = (await admin.cluster()).controller
    assert controller is not None
    active = int(controller.coordinator_id.removeprefix("c"))
    cluster.kill(leader)
    cluster.kill_coordinator(active)
    cluster.kill_proxy(0)
    try:
        cluster.start_proxy(0)
        async with AsyncAdmin(cluster.proxy_url(0)) as after:
            await _new_leader(after, topic, leader, timeout_s=60)
        async with AsyncShareConsumer(cluster.proxy_url(0), group, topic) as consumer:
            got = await _acquire_all(consumer, 3, timeout_s=60)
            again = await _acquire_all(consumer, 1, timeout_s=3)
        assert sorted(r.offset for r, _ in got) == [0, 1, 2]
        assert [r.delivery_count for r, _ in got] == [1, 1, 1]
        for record, at in got:
            assert at >= _due(record) == dues[record.offset]
        assert again == []
    finally:
        cluster.start_broker(leader)
        cluster.start_coordinator(active)
