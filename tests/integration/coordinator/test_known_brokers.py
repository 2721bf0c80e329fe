"""Known brokers on a real cluster (etcd, two coordinators, two brokers and a rest-proxy as
processes, 2 s leases): a broker killed with SIGKILL is listed down with when it was last seen,
by both admin APIs and by ``yak cluster status`` (the real ``yak`` entry point); the standby
that takes over from a killed controller keeps that time; the broker started again is up; a
stopped broker is forgotten with ``yak brokers forget``, a running one is not."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from loadtest.local_cluster import LocalCluster, local_cluster
from yak.api.admin import BrokerInfo, BrokerStatus, ClusterInfo
from yak.clients.admin import AdminClient
from yak.errors import YakError
from yak.etcd_server import EmbeddedEtcd
from yak.sdk import AsyncAdmin

pytestmark = pytest.mark.integration

WAIT_S = 20.0


@pytest.fixture
def cluster(tmp_path: Path, etcd: EmbeddedEtcd) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path, etcd, f"kb-{uuid.uuid4().hex[:8]}", brokers=2) as running:
        running.start_coordinator(1)
        running.start_proxy(0)
        yield running


async def until(
    url: str, check: Callable[[dict[int, BrokerInfo], ClusterInfo], bool]
) -> dict[int, BrokerInfo]:
    """Poll ``GET /admin/v1/cluster`` until ``check`` holds (other processes' work: no event
    to wait on here)."""
    deadline = time.monotonic() + WAIT_S
    async with AdminClient(url) as admin:
        while True:
            try:
                info = await admin.cluster()
                brokers = {b.broker_id: b for b in info.brokers}
                if check(brokers, info):
                    return brokers
            except YakError:
                pass
            assert time.monotonic() < deadline, "the cluster never got there"
            await asyncio.sleep(0.1)


async def yak(*args: str) -> subprocess.CompletedProcess[str]:
    """The ``yak`` CLI through its installed entry point, wide enough not to wrap a table."""
    argv = [str(Path(sys.executable).with_name("yak")), *args]
    env = {**os.environ, "COLUMNS": "200"}
    return await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, timeout=60, env=env
    )


def row(output: str, broker_id: int) -> str:
    """The table row of ``broker_id`` in ``yak cluster status`` / ``yak brokers list``."""
    rows = [line for line in output.splitlines() if line.count("│") > 3]
    found = [line for line in rows if line.split("│")[1].strip() == str(broker_id)]
    assert len(found) == 1, output
    return found[0]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def test_a_killed_broker_is_down_with_its_last_seen_time_then_up_then_forgotten(
    cluster: LocalCluster,
) -> None:
    first = cluster.coordinator_urls[0]
    standby = cluster.coordinator_urls[1]
    up = await until(
        first,
        lambda b, _: sorted(b) == [0, 1] and all(i.status is BrokerStatus.UP for i in b.values()),
    )
    first_registered = up[1].first_registered_ms
    assert first_registered is not None

    killed_at = now_ms()
    cluster.kill(1)
    # Down as soon as its lease expired; last seen once the controller has recorded when.
    down = await until(
        first, lambda b, _: b[1].status is BrokerStatus.DOWN and b[1].last_seen_ms is not None
    )
    gone = down[1]
    assert gone.last_seen_ms is not None
    # Its lease (2 s) outlived the process by at most its TTL; it was seen until then.
    assert killed_at - 2_500 <= gone.last_seen_ms <= now_ms()
    assert (gone.host, gone.port, gone.first_registered_ms) == (
        "127.0.0.1",
        cluster.broker_ports[1],
        first_registered,
    )
    assert down[0].status is BrokerStatus.UP
    async with AsyncAdmin(cluster.proxy_url(0)) as proxy:  # the rest-proxy's listing
        listed = {b.broker_id: b for b in await proxy.brokers()}
        assert (listed[1].status, listed[1].last_seen_ms) == (BrokerStatus.DOWN, gone.last_seen_ms)
        assert listed[0].status is BrokerStatus.UP

    status = await yak("cluster", "status", "--coordinator", standby)
    assert status.returncode == 0, status.stderr
    assert "2 brokers, 1 up" in status.stdout, status.stdout
    assert "│ up " in row(status.stdout, 0)
    assert "│ now " in row(status.stdout, 0)
    assert "│ down " in row(status.stdout, 1)
    assert " ago (" in row(status.stdout, 1)

    # The controller dies; the standby that takes over does not move the last-seen time.
    cluster.kill_coordinator(0)
    after = await until(
        standby,
        lambda _, info: info.controller is not None and info.controller.coordinator_id == "c1",
    )
    assert after[1].last_seen_ms == gone.last_seen_ms

    # Started again: up, first registered kept, its new process' start time.
    await asyncio.to_thread(cluster.start_broker, 1)
    back = await until(standby, lambda b, _: b[1].status is BrokerStatus.UP)
    assert back[1].first_registered_ms == first_registered
    assert back[1].started_at_ms is not None
    assert back[1].started_at_ms >= killed_at

    # Stopped for good (no replica on it: no topic was created) and forgotten.
    refused = await yak("brokers", "forget", "0", "--coordinator", standby)
    assert refused.returncode == 1
    assert "BROKER_STILL_REGISTERED" in refused.stderr
    cluster.kill(1)
    await until(standby, lambda b, _: b[1].status is BrokerStatus.DOWN)
    forgotten = await yak("brokers", "forget", "1", "--coordinator", standby)
    assert forgotten.returncode == 0, forgotten.stderr
    assert "broker 1 forgotten" in forgotten.stdout
    listed_now = await yak("brokers", "list", "--coordinator", standby)
    assert "1 broker, 1 up" in listed_now.stdout, listed_now.stdout
    again = await yak("brokers", "forget", "1", "--coordinator", standby)
    assert again.returncode == 1
    assert "BROKER_ID_NOT_REGISTERED" in again.stderr
