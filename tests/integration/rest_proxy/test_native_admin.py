"""The native admin API through a proxy: the cluster, and a topic's whole life."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import unique

pytestmark = pytest.mark.integration


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
