"""Load-aware partitioning on a real cluster: one broker is loaded with a real produce stream to
the partitions it leads, and keyless records produced with ``partitioner=load_aware`` shift away
from its partitions, where ``round_robin`` in the same test spreads them evenly.

Etcd, a coordinator, three brokers publishing their load every second (the least interval) and
one rest-proxy, as processes. Topic ``spread`` has six partitions of one replica (two led by
each broker: only the leader works for a record). A background stream of large acks=1 requests
to the partitions broker 0 leads on another topic makes it the busiest: CPU and records/s.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from loadtest.local_cluster import LocalCluster, local_cluster
from yak.etcd_server import EmbeddedEtcd

pytestmark = pytest.mark.integration

LOADED = 0
#: Records of one request of the background stream (200 bytes each).
STREAM_RECORDS = 1_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd) -> Iterator[LocalCluster]:
    folder: Path = tmp_path_factory.mktemp("load-aware")
    with local_cluster(folder, etcd, f"la-{uuid.uuid4().hex[:8]}", brokers=0) as running:
        for broker_id in range(3):
            running.start_broker(broker_id, YAK_LOAD_PUBLISH_INTERVAL_MS="1000")
        running.start_proxy(0)
        yield running


async def _topic(proxy: httpx.AsyncClient, cluster: LocalCluster, name: str) -> dict[int, int]:
    """Create ``name`` (6 partitions, 1 replica); partition → leader once all are led."""
    async with httpx.AsyncClient(base_url=cluster.coordinator_url, timeout=30) as admin:
        body = {"name": name, "partitions": 6, "replication_factor": 1, "configs": {}}
        created = await admin.post("/admin/v1/topics", json=body)
        assert created.status_code == 201, created.text
    deadline = time.monotonic() + 20
    while True:
        parts = (await proxy.get(f"/api/v1/topics/{name}")).json().get("partitions", [])
        if len(parts) == 6 and all(p["leader"] >= 0 for p in parts):
            return {p["partition"]: p["leader"] for p in parts}
        assert time.monotonic() < deadline, f"{name} never got its leaders: {parts}"
        await asyncio.sleep(0.1)  # another process's metadata: nothing to await here


async def _stream(proxy: httpx.AsyncClient, topic: str, partitions: list[int]) -> None:
    """Produce to ``partitions`` (led by the loaded broker) as fast as the proxy takes it."""
    turn = 0
    while True:
        partition = partitions[turn % len(partitions)]
        turn += 1
        records = [{"value": "x" * 200, "partition": partition}] * STREAM_RECORDS
        answer = await proxy.post(
            f"/api/v1/topics/{topic}/records?acks=1",
            json={"records": records, "value_encoding": "string"},
        )
        assert answer.status_code == 200, answer.text


async def _loads(proxy: httpx.AsyncClient) -> dict[int, dict[str, Any]]:
    brokers = (await proxy.get("/api/v1/brokers")).json()
    return {b["broker_id"]: b["load"] for b in brokers if b.get("load")}


async def _wait_until_loaded(proxy: httpx.AsyncClient) -> dict[int, dict[str, Any]]:
    """The published samples once the loaded broker's rate dwarfs the others'."""
    deadline = time.monotonic() + 30
    while True:
        loads = await _loads(proxy)
        if len(loads) == 3 and not any(load["stale"] for load in loads.values()):
            rates = {b: load["records_per_second"] for b, load in loads.items()}
            others = max(rate for b, rate in rates.items() if b != LOADED)
            if rates[LOADED] > 5 * max(others, 200.0):
                return loads
        assert time.monotonic() < deadline, f"broker {LOADED} never showed its load: {loads}"
        await asyncio.sleep(0.5)  # the brokers publish every second; nothing to await here


async def _share_of_loaded(
    proxy: httpx.AsyncClient, topic: str, leaders: dict[int, int], partitioner: str
) -> float:
    """The share of 3,000 keyless 1 KiB records (60 requests) that landed on partitions the
    loaded broker leads."""
    body = {"records": [{"value": "y" * 1_000} for _ in range(50)], "value_encoding": "string"}
    landed: Counter[int] = Counter()
    for _ in range(60):
        answer = await proxy.post(
            f"/api/v1/topics/{topic}/records?partitioner={partitioner}", json=body
        )
        assert answer.status_code == 200, answer.text
        landed.update(leaders[r["partition"]] for r in answer.json()["results"])
    return landed[LOADED] / sum(landed.values())


async def test_load_aware_shifts_keyless_records_away_from_the_loaded_broker(
    cluster: LocalCluster,
) -> None:
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as proxy:
        spread_name = f"spread-{uuid.uuid4().hex[:6]}"
        spread = await _topic(proxy, cluster, spread_name)
        assert sorted(Counter(spread.values()).values()) == [2, 2, 2], spread
        hot_name = f"hot-{uuid.uuid4().hex[:6]}"
        hot = await _topic(proxy, cluster, hot_name)
        hot_partitions = [p for p, leader in hot.items() if leader == LOADED]
        assert hot_partitions, hot
        streams = [asyncio.create_task(_stream(proxy, hot_name, hot_partitions)) for _ in range(3)]
        try:
            loads = await _wait_until_loaded(proxy)
            round_robin = await _share_of_loaded(proxy, spread_name, spread, "round_robin")
            load_aware = await _share_of_loaded(proxy, spread_name, spread, "load_aware")
        finally:
            for stream in streams:
                stream.cancel()
            for stream in streams:
                with contextlib.suppress(asyncio.CancelledError):
                    await stream
    assert round_robin == pytest.approx(1 / 3, abs=0.02), loads  # 2 of 6 partitions, in turn
    assert load_aware < round_robin / 2, (load_aware, loads)
