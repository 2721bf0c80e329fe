"""The native admin API through a proxy: the cluster, and a topic's whole life."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import create_topic, unique
from yak.sdk import AsyncAdmin

pytestmark = pytest.mark.integration

#: Makes only its own topics and groups: the package's shared cluster (conftest.py).
SHARED_CLUSTER = True


async def test_topic_lifecycle_through_the_proxy(cluster: LocalCluster) -> None:
    topic = unique("admin")
    async with httpx.AsyncClient(base_url=cluster.proxy_url(1), timeout=30) as proxy:
        deadline = time.monotonic() + 15
        while True:  # a 2 s registration lease can lapse for a moment on a loaded machine
            info = (await proxy.get("/api/v1/cluster")).json()
            brokers = (await proxy.get("/api/v1/brokers")).json()
            if len(info["brokers"]) == len(brokers) == 3 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)  # registrations are other processes' work
        assert [b["broker_id"] for b in info["brokers"]] == [0, 1, 2]
        assert info["controller"] is not None
        assert [(b["broker_id"], b["host"]) for b in brokers] == [
            (i, "127.0.0.1") for i in range(3)
        ]

        created = await proxy.post(
            "/api/v1/topics",
            json={
                "name": topic,
                "partitions": 2,
                "replication_factor": 2,
                "configs": {"retention.ms": "60000"},
            },
        )
        assert created.status_code == 201, created.text
        assert created.json()["partition_count"] == 2
        again = await proxy.post("/api/v1/topics", json={"name": topic, "partitions": 1})
        assert (again.status_code, again.json()["code"]) == (409, "TOPIC_ALREADY_EXISTS")
        bad = await proxy.post("/api/v1/topics", json={"name": "../etc", "partitions": 1})
        assert (bad.status_code, bad.json()["code"]) == (400, "INVALID_TOPIC_EXCEPTION")
        bad = await proxy.post(
            "/api/v1/topics", json={"name": unique("cfg"), "configs": {"retention.ms": "soon"}}
        )
        assert (bad.status_code, bad.json()["code"]) == (400, "INVALID_CONFIG")

        listed = (await proxy.get("/api/v1/topics")).json()["topics"]
        assert topic in [t["name"] for t in listed]
        altered = await proxy.patch(
            f"/api/v1/topics/{topic}/configs", json={"set": {"retention.ms": "120000"}}
        )
        assert altered.json()["configs"]["retention.ms"] == "120000"
        grown = await proxy.post(f"/api/v1/topics/{topic}/partitions", json={"count": 4})
        assert grown.json()["partition_count"] == 4
        described = (await proxy.get(f"/api/v1/topics/{topic}")).json()
        assert [p["partition"] for p in described["partitions"]] == [0, 1, 2, 3]

        deleted = await proxy.delete(f"/api/v1/topics/{topic}")
        assert deleted.status_code == 200, deleted.text
        missing = await proxy.get(f"/api/v1/topics/{topic}")
        assert (missing.status_code, missing.json()["code"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION")


async def test_log_dirs_and_offsets_by_timestamp(cluster: LocalCluster) -> None:
    topic = unique("logdirs")
    await create_topic(cluster, topic, partitions=2, replication_factor=2)
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as proxy:
        before = int(time.time() * 1000)
        for i in range(3):
            sent = await proxy.post(
                f"/api/v1/topics/{topic}/records",
                json={"records": [{"value": i, "partition": 0, "timestamp": before + i * 1000}]},
            )
            assert sent.status_code == 200, sent.text

        dirs = (await proxy.get("/api/v1/log-dirs", params={"topic": topic})).json()["brokers"]
        assert sorted(d["broker_id"] for d in dirs) == [0, 1, 2]
        replicas = [(d["broker_id"], r) for d in dirs for r in d["replicas"]]
        assert {r["topic"] for _, r in replicas} == {topic}
        assert sorted((r["partition"], r["is_leader"]) for _, r in replicas) == [
            (0, False),
            (0, True),
            (1, False),
            (1, True),
        ]
        (leader0,) = [r for _, r in replicas if r["partition"] == 0 and r["is_leader"]]
        assert (leader0["log_start_offset"], leader0["high_watermark"]) == (0, 3)
        assert leader0["size_bytes"] > 0
        for d in dirs:
            assert d["error"] is None
            assert 0 < d["disk_free_bytes"] <= d["disk_total_bytes"]
            assert d["size_bytes"] >= sum(r["size_bytes"] for r in d["replicas"])

        one = (await proxy.get("/api/v1/log-dirs", params={"broker": 1})).json()["brokers"]
        assert [d["broker_id"] for d in one] == [1]
        summed = (await proxy.get("/api/v1/log-dirs/topics")).json()["brokers"]
        assert sorted(d["broker_id"] for d in summed) == [0, 1, 2]
        per_topic = [t for d in summed for t in d["topics"] if t["topic"] == topic]
        assert sum(t["replicas"] for t in per_topic) == 4
        assert sum(t["leaders"] for t in per_topic) == 2
        assert sum(t["records"] for t in per_topic) == 3
        assert sum(t["high_watermark_sum"] for t in per_topic) == 3
        assert sum(t["leader_size_bytes"] for t in per_topic) == leader0["size_bytes"]
        for d in summed:
            assert d["replicas"] == sum(t["replicas"] for t in d["topics"])

        path = f"/api/v1/topics/{topic}/partitions/0/offsets"
        found = (await proxy.get(path, params={"timestamp": str(before + 1500)})).json()
        assert found["offset"] == 2
        assert (await proxy.get(path, params={"timestamp": "earliest"})).json()["offset"] == 0
        assert (await proxy.get(path, params={"timestamp": "latest"})).json()["offset"] == 3
        late = await proxy.get(path, params={"timestamp": str(before + 60_000)})
        assert late.json()["offset"] == -1
        bad = await proxy.get(path, params={"timestamp": "yesterday"})
        assert (bad.status_code, bad.json()["code"]) == (400, "INVALID_REQUEST")
        gone = await proxy.get(f"/api/v1/topics/{topic}/partitions/7/offsets")
        assert (gone.status_code, gone.json()["code"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION")


async def test_many_topics_described_in_one_request(cluster: LocalCluster) -> None:
    first, second = unique("bulk-a"), unique("bulk-b")
    await create_topic(cluster, first, partitions=2, replication_factor=2)
    await create_topic(cluster, second, partitions=3, replication_factor=3)
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as proxy:
        asked = await proxy.get(
            "/api/v1/topic-descriptions",
            params=[("topic", second), ("topic", first), ("topic", unique("absent"))],
        )
        assert asked.status_code == 200, asked.text
        topics = asked.json()["topics"]
        assert [t["name"] for t in topics] == sorted([first, second])  # the unknown one left out
        one = {t["name"]: t for t in topics}
        # The same answer as describing each topic on its own.
        for name in (first, second):
            alone = (await proxy.get(f"/api/v1/topics/{name}")).json()
            assert one[name] == alone
        assert [len(one[first]["partitions"]), len(one[second]["partitions"])] == [2, 3]
        assert all(len(p["replicas"]) == 3 for p in one[second]["partitions"])

        every = (await proxy.get("/api/v1/topic-descriptions")).json()["topics"]
        names = [t["name"] for t in every]
        assert {first, second} <= set(names)
        assert names == sorted(names)

        bad = await proxy.get("/api/v1/topic-descriptions", params={"topic": "../etc"})
        assert (bad.status_code, bad.json()["code"]) == (400, "INVALID_TOPIC_EXCEPTION")

    async with AsyncAdmin(cluster.proxy_url(0)) as admin:
        described = await admin.describe_topics([first, unique("absent")])
        assert [t.name for t in described] == [first]
        assert await admin.describe_topics([]) == []
        assert {first, second} <= {t.name for t in await admin.describe_topics()}


async def test_a_topic_made_through_one_proxy_is_described_whole_by_the_other(
    cluster: LocalCluster,
) -> None:
    """Read-your-writes across proxies (a load balancer sends the next request anywhere): the
    controller writes the record and the partition states in two revisions, and the other
    proxy's watch may have delivered only the first; its answers wait for the rest."""
    async with (
        httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as maker,
        httpx.AsyncClient(base_url=cluster.proxy_url(1), timeout=30) as reader,
    ):
        for round_ in range(8):
            topic = unique(f"ryw{round_}")
            made = await maker.post(
                "/api/v1/topics", json={"name": topic, "partitions": 6, "replication_factor": 2}
            )
            assert made.status_code == 201, made.text
            native, v2, v2_last, many = await asyncio.gather(
                reader.get(f"/api/v1/topics/{topic}"),
                reader.get(f"/topics/{topic}/partitions"),
                reader.get(f"/topics/{topic}/partitions/5"),
                reader.get("/api/v1/topic-descriptions", params={"topic": [topic]}),
            )
            assert [p["partition"] for p in native.json()["partitions"]] == list(range(6))
            assert [p["partition"] for p in v2.json()] == list(range(6))
            assert v2_last.json()["partition"] == 5, v2_last.text
            [described] = many.json()["topics"]
            assert len(described["partitions"]) == 6
