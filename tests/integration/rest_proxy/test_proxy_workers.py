"""``yak-rest-proxy --workers N``: N processes serve one port (SO_REUSEPORT), each a whole proxy;
SIGTERM stops them all."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from pathlib import Path

import httpx
import pytest

from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import create_topic, unique

pytestmark = pytest.mark.integration

_HEALTHZ_COUNT = re.compile(
    r'^yak_http_request_duration_seconds_count\{[^}]*route="/healthz"[^}]*\} (\S+)', re.M
)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found.extend(int(child) for child in text)
    return found


def _gone(pids: list[int], timeout_s: float) -> list[int]:
    """Wait for ``pids`` to exit (other processes: nothing to await); those still running."""
    deadline = time.monotonic() + timeout_s
    while True:
        running = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.1)


async def test_two_workers_share_the_port_and_stop_together(cluster: LocalCluster) -> None:
    process = cluster.start_proxy(7, YAK_WORKERS="2")
    workers = _children(process.pid)
    assert len(workers) == 2
    topic = unique("workers")
    await create_topic(cluster, topic, partitions=1)
    url = cluster.proxy_url(7)
    # New connections are spread over the workers by the kernel: each answers produce
    # requests as a whole proxy would, and counts only what it served.
    for index in range(40):
        async with httpx.AsyncClient(base_url=url, timeout=30) as proxy:
            assert (await proxy.get("/healthz")).status_code == 200
            if index % 10 == 0:
                answer = await proxy.post(
                    f"/api/v1/topics/{topic}/records", json={"records": [{"value": index}]}
                )
                assert answer.status_code == 200, answer.text
    counts: set[float] = set()
    for _ in range(20):
        async with httpx.AsyncClient(base_url=url, timeout=30) as proxy:
            metrics = (await proxy.get("/metrics")).text
        counts.update(float(v) for v in _HEALTHZ_COUNT.findall(metrics))
    assert len(counts) == 2, counts  # two workers, two counters, adding up to the requests
    assert sum(counts) >= 40
    async with httpx.AsyncClient(base_url=url, timeout=30) as proxy:
        read = await proxy.get(f"/api/v1/topics/{topic}/partitions/0/records", params={"offset": 0})
    assert [r["value"] for r in read.json()["records"]] == [0, 10, 20, 30]
    os.kill(process.pid, signal.SIGTERM)
    assert await asyncio.to_thread(_gone, workers, 20.0) == []
    await asyncio.to_thread(process.popen.wait, 20)
    cluster.proxies.pop(7, None)
