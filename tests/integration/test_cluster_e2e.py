"""The whole single-replica cluster as ``yak up`` starts it: 2 coordinators, 3 brokers, real etcd.

One topic's partitions spread over the three brokers; produce then fetch returns the records in
order from every leader; kill -9 of the active coordinator lets the standby take over, and a
topic created afterwards is placed, hosted and writable.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.ports import free_base_port, layout_offsets
from tests.integration.yak_up_process import yak_up
from yak.api.admin import TopicDescription
from yak.clients.admin import AdminClient
from yak.clients.broker import BrokerClient
from yak.errors import TopicAlreadyExistsError
from yak.record import RecordInput, encode_batch, iter_records

pytestmark = pytest.mark.integration

BROKERS = 3


@dataclass
class Cluster:
    coordinators: dict[str, tuple[str, int]]  # node id -> (url, pid)
    brokers: dict[int, str]  # broker id -> url


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    base = free_base_port(layout_offsets(BROKERS))
    args = ["--data-dir", str(tmp_path), "--base-port", str(base)]
    args += ["--brokers", str(BROKERS), "--cluster-id", "e2e"]
    # --no-restart: a killed coordinator stays down, the standby must take over.
    with yak_up(*args, "--no-restart", stop_timeout_s=30):
        document = json.loads((tmp_path / "cluster.json").read_text())
        processes = {p["name"]: p for p in document["processes"]}
        yield Cluster(
            coordinators={
                name.removeprefix("coordinator-"): (p["url"], p["pid"])
                for name, p in processes.items()
                if name.startswith("coordinator-")
            },
            brokers={i: processes[f"broker-{i}"]["url"] for i in range(BROKERS)},
        )


async def _wait_for_controller(admin: AdminClient, exclude: str | None = None) -> str:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            controller = (await admin.cluster()).controller
        except OSError:
            controller = None
        if controller is not None and controller.coordinator_id != exclude:
            return controller.coordinator_id
        await asyncio.sleep(0.1)  # another process's election: nothing to wait on here
    raise AssertionError(f"no controller other than {exclude!r} within 15 s")


async def _wait_all_live(admin: AdminClient) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if len((await admin.cluster()).brokers) == BROKERS:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("brokers did not all register")


async def _produce_and_fetch(cluster: Cluster, topic: TopicDescription) -> None:
    """Every partition: three appends to its leader, then one fetch returns them in order."""
    for partition in topic.partitions:
        async with BrokerClient(cluster.brokers[partition.leader]) as client:
            expected: list[bytes] = []
            for round_ in range(3):
                prefix = f"{topic.name}/{partition.partition}/{round_}"
                values = [f"{prefix}/{i}".encode() for i in range(5)]
                result = await _produce_when_hosted(client, topic.name, partition.partition, values)
                assert result == len(expected)
                expected += values
            fetched = await client.fetch_one(topic.name, partition.partition, 0, max_wait_ms=0)
            assert [r.value for r in iter_records(fetched.records)] == expected
            assert fetched.high_watermark == len(expected)


async def _produce_when_hosted(
    client: BrokerClient, topic: str, partition: int, values: list[bytes]
) -> int:
    """Produce once the broker has picked the partition up from its etcd watch."""
    batch = encode_batch([RecordInput(key=None, value=v) for v in values])
    deadline = time.monotonic() + 10
    while True:
        hosted = {(p.topic, p.partition) for p in (await client.partitions()).partitions}
        if (topic, partition) in hosted or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    return (await client.produce_one(topic, partition, batch)).base_offset


async def test_partitions_spread_produce_fetch_and_coordinator_failover(
    cluster: Cluster,
) -> None:
    any_url = next(iter(cluster.coordinators.values()))[0]
    async with AdminClient(any_url) as admin:
        active = await _wait_for_controller(admin)
        await _wait_all_live(admin)
        created = await admin.create_topic("orders", partitions=6)
        assert [p.partition for p in created.partitions] == list(range(6))
        leaders = [p.leader for p in created.partitions]
        assert sorted(set(leaders)) == [0, 1, 2]
        assert all(leaders.count(b) == 2 for b in range(BROKERS))  # evenly spread
        await _produce_and_fetch(cluster, created)
        with pytest.raises(TopicAlreadyExistsError):
            await admin.create_topic("orders", partitions=1)

    _, pid = cluster.coordinators[active]
    os.kill(pid, signal.SIGKILL)
    standby_url = next(u for node, (u, _) in cluster.coordinators.items() if node != active)
    async with AdminClient(standby_url) as admin:
        new_active = await _wait_for_controller(admin, exclude=active)
        assert new_active != active
        after = await admin.create_topic("after-failover", partitions=3)
        assert sorted(p.leader for p in after.partitions) == [0, 1, 2]
        await _produce_and_fetch(cluster, after)
        # The first topic is still described the same under the new controller.
        again = await admin.describe_topic("orders")
        assert [p.leader for p in again.partitions] == leaders
