"""A real cluster for the REST API tests: etcd, a coordinator, 3 brokers and 2 rest-proxies, as
processes, shared by the tests of one module (each test uses its own topics and groups).

A module that only makes its own topics and groups, and kills, pauses or reconfigures nothing,
says so with ``SHARED_CLUSTER = True``: those modules share one cluster of the same shape
(``shared_cluster``, for the package) instead of starting one each (about 8 s of start-up and
a second of stop per module on CI's 2 cores). The others (a module that kills a broker or a
proxy, fuzzes the admin API, or needs other settings) still get one of their own."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from loadtest.local_cluster import LocalCluster, local_cluster
from yak.etcd_server import EmbeddedEtcd

V2 = "application/vnd.kafka.v2+json"
V2_JSON = "application/vnd.kafka.json.v2+json"
V2_BINARY = "application/vnd.kafka.binary.v2+json"


@contextmanager
def _started(factory: pytest.TempPathFactory, etcd: EmbeddedEtcd) -> Iterator[LocalCluster]:
    folder: Path = factory.mktemp("cluster")
    with local_cluster(folder, etcd, f"rp-{uuid.uuid4().hex[:8]}", brokers=3) as running:
        running.start_proxy(0, YAK_CONSUMER_INSTANCE_TIMEOUT_MS="5000")
        running.start_proxy(1, YAK_CONSUMER_INSTANCE_TIMEOUT_MS="5000")
        yield running


@pytest.fixture(scope="package")
def shared_cluster(
    tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd
) -> Iterator[LocalCluster]:
    """The cluster of the modules that set ``SHARED_CLUSTER = True`` (see the module doc)."""
    with _started(tmp_path_factory, etcd) as running:
        yield running


@pytest.fixture(scope="module")
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd
) -> Iterator[LocalCluster]:
    if getattr(request.module, "SHARED_CLUSTER", False):
        shared: LocalCluster = request.getfixturevalue("shared_cluster")
        yield shared
        return
    with _started(tmp_path_factory, etcd) as running:
        yield running


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def create_topic(
    cluster: LocalCluster,
    name: str,
    partitions: int = 3,
    replication_factor: int = 3,
    configs: dict[str, str] | None = None,
) -> None:
    """Create a topic through the coordinator and wait until every proxy can produce to it."""
    async with httpx.AsyncClient(base_url=cluster.coordinator_url, timeout=30) as admin:
        response = await admin.post(
            "/admin/v1/topics",
            json={
                "name": name,
                "partitions": partitions,
                "replication_factor": replication_factor,
                "configs": configs or {},
            },
        )
        assert response.status_code == 201, response.text
    deadline = time.monotonic() + 20
    for index in cluster.proxies:
        async with httpx.AsyncClient(base_url=cluster.proxy_url(index)) as proxy:
            while True:
                body = (await proxy.get(f"/topics/{name}")).json()
                parts = body.get("partitions", [])
                if len(parts) == partitions and all(p["leader"] >= 0 for p in parts):
                    break
                assert time.monotonic() < deadline, f"{name} not ready on proxy {index}: {body}"
                await asyncio.sleep(0.05)  # another process's metadata: nothing to await here
