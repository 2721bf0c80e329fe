"""The proxy's producer across a leader's kill -9: clients keep producing through the proxy
(acks=all, RF 3, min ISR 2) while the leader of every partition dies in turn; afterwards every
record the proxy acknowledged is in the log exactly once at the offset it reported, and no
record is in the log twice — the proxy's retries went to the new leader as the same idempotent
batches. Also: two groups read one topic independently. Own module: it kills brokers, so it
gets a cluster of its own."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import httpx
import pytest

from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import V2_JSON, create_topic, unique

pytestmark = pytest.mark.integration

PARTITIONS = 3


async def produce_loop(
    http: httpx.AsyncClient,
    topic: str,
    name: str,
    stop: asyncio.Event,
    acked: dict[str, tuple[int, int]],
) -> int:
    sent = 0
    while not stop.is_set():
        values = [f"{name}-{sent + i}" for i in range(10)]
        sent += 10
        try:
            answer = await http.post(
                f"/topics/{topic}", json={"records": [{"key": v, "value": v} for v in values]}
            )
        except httpx.HTTPError:
            continue  # unanswered: maybe written, maybe not — neither acknowledged
        if answer.status_code != 200:
            continue
        for value, result in zip(values, answer.json()["offsets"], strict=True):
            if result["error_code"] is None:
                acked[value] = (result["partition"], result["offset"])
    return sent


async def read_partition(http: httpx.AsyncClient, topic: str, partition: int) -> list[Any]:
    records: list[Any] = []
    offset = 0
    while True:
        answer = await http.get(
            f"/api/v1/topics/{topic}/partitions/{partition}/records",
            params={"offset": offset, "max_bytes": 1_000_000},
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        records += body["records"]
        if body["next_offset"] >= body["high_watermark"]:
            return records
        offset = body["next_offset"]


async def leader_of(http: httpx.AsyncClient, topic: str, partition: int) -> int:
    leader: int = (await http.get(f"/topics/{topic}/partitions/{partition}")).json()["leader"]
    return leader


async def test_no_acknowledged_record_lost_or_doubled_across_leader_kills(
    cluster: LocalCluster,
) -> None:
    topic = unique("failover")
    await create_topic(cluster, topic, partitions=PARTITIONS, configs={"min.insync.replicas": "2"})
    acked: dict[str, tuple[int, int]] = {}
    stop = asyncio.Event()
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=60) as http:
        loops = [
            asyncio.create_task(produce_loop(http, topic, f"c{i}", stop, acked)) for i in range(4)
        ]
        try:
            await asyncio.sleep(1.0)
            for partition in range(PARTITIONS):
                victim = await leader_of(http, topic, partition)
                if victim < 0:
                    continue
                cluster.kill(victim)
                await asyncio.sleep(3.0)  # lease expiry (2 s) and a new leader, under load
                await asyncio.to_thread(cluster.start_broker, victim)
            await asyncio.sleep(1.0)
        finally:
            stop.set()
            await asyncio.gather(*loops)
        deadline = time.monotonic() + 30
        stored: dict[int, list[Any]] = {}
        while time.monotonic() < deadline:  # the high watermark catches up once ISRs refill
            stored = {p: await read_partition(http, topic, p) for p in range(PARTITIONS)}
            found = {r["value"] for records in stored.values() for r in records}
            if set(acked) <= found:
                break
            await asyncio.sleep(0.2)  # replication is other processes' work
    counts = Counter(r["value"] for records in stored.values() for r in records)
    doubled = [value for value, count in counts.items() if count > 1]
    assert not doubled, f"written twice: {doubled[:10]}"
    where = {(p, r["offset"]): r["value"] for p, records in stored.items() for r in records}
    for value, (partition, offset) in acked.items():
        assert where.get((partition, offset)) == value, f"{value} not at {partition}@{offset}"
    assert len(acked) > 200, f"only {len(acked)} records acknowledged"


async def test_two_groups_read_one_topic_independently(cluster: LocalCluster) -> None:
    topic = unique("twogroups")
    await create_topic(cluster, topic, partitions=2)
    async with httpx.AsyncClient(base_url=cluster.proxy_url(1), timeout=30) as http:
        answer = await http.post(
            f"/topics/{topic}", json={"records": [{"value": i} for i in range(30)]}
        )
        assert answer.status_code == 200
        seen: dict[str, list[int]] = {}
        for group in (unique("ga"), unique("gb")):
            create = {"name": "only", "format": "json", "auto.offset.reset": "earliest"}
            assert (await http.post(f"/consumers/{group}", json=create)).status_code == 200
            uri = f"/consumers/{group}/instances/only"
            assert (
                await http.post(f"{uri}/subscription", json={"topics": [topic]})
            ).status_code == 204
            values: list[int] = []
            polls: Counter[int] = Counter()  # status codes: what a failure says happened
            last = ""
            deadline = time.monotonic() + 20
            while len(values) < 30 and time.monotonic() < deadline:
                polled = await http.get(
                    f"{uri}/records", params={"timeout": 1000}, headers={"accept": V2_JSON}
                )
                polls[polled.status_code] += 1
                if polled.status_code != 200:
                    last = polled.text
                    continue
                values += [r["value"] for r in polled.json()]
            assignment = (await http.get(f"{uri}/assignments")).text
            seen[group] = sorted(values)
            assert seen[group] == list(range(30)), (group, polls, last[:300], assignment[:300])
