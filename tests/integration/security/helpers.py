"""Shared by the security integration tests: a topic that is ready on proxy 0."""

from __future__ import annotations

import asyncio
import time

import httpx

from loadtest.local_cluster import LocalCluster


async def ready_topic(cluster: LocalCluster, name: str) -> None:
    """Create a one-partition topic through the coordinator; wait until proxy 0 has a leader."""
    async with httpx.AsyncClient(base_url=cluster.coordinator_url, timeout=30) as admin:
        body = {"name": name, "partitions": 1, "replication_factor": 1}
        made = await admin.post("/admin/v1/topics", json=body)
        assert made.status_code == 201, made.text
    deadline = time.monotonic() + 20
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0)) as proxy:
        while True:
            parts = (await proxy.get(f"/topics/{name}")).json().get("partitions", [])
            if parts and parts[0]["leader"] >= 0:
                return
            assert time.monotonic() < deadline, name
            await asyncio.sleep(0.05)  # another process's metadata: nothing to await here
