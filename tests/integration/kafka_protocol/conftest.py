"""The Kafka listener's integration modules: each gets its own plaintext cluster (etcd, a
coordinator, 3 brokers with Kafka listeners, one rest-proxy; ``loadtest.local_cluster``) and
the brokers' Kafka bootstrap string as ``yak cluster status`` lists it. The secure module
brings its own cluster."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from loadtest.local_cluster import LocalCluster, local_cluster
from yak.etcd_server import EmbeddedEtcd

BROKERS = 3


@pytest.fixture(scope="module")
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd
) -> Iterator[LocalCluster]:
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_").replace("_", "-")
    folder = tmp_path_factory.mktemp(name)
    with local_cluster(folder, etcd, f"{name}-{uuid.uuid4().hex[:8]}", brokers=BROKERS) as running:
        running.start_proxy(0)
        yield running


@pytest.fixture(scope="module")
def bootstrap(cluster: LocalCluster) -> str:
    """The brokers' Kafka listeners, once every broker registered one."""
    deadline = time.monotonic() + 20
    while True:
        brokers = httpx.get(f"{cluster.coordinator_url}/admin/v1/cluster").json()["brokers"]
        addresses = [b["kafka"] for b in brokers if b.get("kafka")]
        if len(addresses) == BROKERS:
            return ",".join(addresses)
        assert time.monotonic() < deadline, brokers
        time.sleep(0.1)  # another process's registration: nothing to await
