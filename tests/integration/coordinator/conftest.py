"""Real ``yak-coordinator`` processes on the session's etcd, one fresh cluster id per test.

``coordinators`` starts processes (free ports, short election lease) and kills whatever is
still running when the test ends. ``brokers`` registers broker ids in etcd on a lease — a
stand-in until real broker processes register themselves (issue 4, broker item).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from yak.etcd_server import EmbeddedEtcd, free_ports
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace
from yak.metadata.lease_keeper import LeaseKeeper
from yak.metadata.models import BrokerRegistration

LEASE_TTL_S = 2
_START_TIMEOUT_S = 20.0


@dataclass
class CoordinatorProcess:
    node_id: str
    url: str
    process: asyncio.subprocess.Process
    log: Path

    @property
    def running(self) -> bool:
        return self.process.returncode is None

    async def signal_and_wait(self, signum: int, timeout_s: float = 15.0) -> int:
        if self.running:
            self.process.send_signal(signum)
        return await asyncio.wait_for(self.process.wait(), timeout_s)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else "(no log)"


@pytest.fixture
def cluster_id() -> str:
    return f"ct-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def keyspace(cluster_id: str) -> Keyspace:
    return Keyspace(cluster_id)


StartCoordinator = Callable[[str], Awaitable[CoordinatorProcess]]


@pytest.fixture
async def coordinators(
    etcd: EmbeddedEtcd, cluster_id: str, tmp_path: Path
) -> AsyncIterator[StartCoordinator]:
    started: list[CoordinatorProcess] = []
    script = str(Path(sys.executable).with_name("yak-coordinator"))

    async def start(node_id: str) -> CoordinatorProcess:
        (port,) = free_ports(1)
        log = tmp_path / f"coordinator-{node_id}.log"
        argv = [script, "--host", "127.0.0.1", "--port", str(port), "--etcd", etcd.endpoint]
        argv += ["--cluster-id", cluster_id, "--node-id", node_id]
        argv += ["--lease-ttl", str(LEASE_TTL_S)]
        with log.open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                *argv, stdout=out, stderr=asyncio.subprocess.STDOUT, env=dict(os.environ)
            )
        coordinator = CoordinatorProcess(node_id, f"http://127.0.0.1:{port}", process, log)
        started.append(coordinator)
        await _wait_ready(coordinator)
        return coordinator

    try:
        yield start
    finally:
        for coordinator in started:
            if coordinator.running:
                coordinator.process.kill()
            await coordinator.process.wait()


async def _wait_ready(coordinator: CoordinatorProcess) -> None:
    """Poll /readyz of a freshly started process until it answers 200 (with a deadline)."""
    deadline = time.monotonic() + _START_TIMEOUT_S
    async with httpx.AsyncClient(timeout=1.0) as client:
        while time.monotonic() < deadline:
            if not coordinator.running:
                pytest.fail(f"coordinator exited during startup:\n{coordinator.log_text()}")
            try:
                if (await client.get(f"{coordinator.url}/readyz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    pytest.fail(f"coordinator not ready in {_START_TIMEOUT_S} s:\n{coordinator.log_text()}")


RegisterBrokers = Callable[..., Awaitable[None]]


@pytest.fixture
async def brokers(
    etcd_store: EtcdMetadataStore, keyspace: Keyspace
) -> AsyncIterator[RegisterBrokers]:
    """Register broker ids on one kept-alive lease (stand-in for real broker processes)."""
    keepers: list[LeaseKeeper] = []

    async def register(*broker_ids: int) -> None:
        lease = await etcd_store.grant_lease(10)
        keeper = LeaseKeeper(etcd_store, lease, 10)
        keeper.start()
        keepers.append(keeper)
        for broker_id in broker_ids:
            registration = BrokerRegistration(
                broker_id=broker_id,
                host="127.0.0.1",
                port=19_000 + broker_id,
                started_at_ms=int(time.time() * 1000),
            )
            await etcd_store.put(keyspace.broker(broker_id), registration.encode(), lease=lease)

    try:
        yield register
    finally:
        for keeper in keepers:
            await keeper.stop(revoke=True)


@pytest.fixture
def wait_for_controller() -> Callable[..., Awaitable[tuple[str, float]]]:
    return _wait_for_controller


async def _wait_for_controller(
    urls: list[str], *, exclude: str | None = None, timeout_s: float = 15.0
) -> tuple[str, float]:
    """Poll ``GET /admin/v1/cluster`` until a controller other than ``exclude`` is named.

    Returns its coordinator id and the seconds it took.
    """
    started = time.monotonic()
    async with httpx.AsyncClient(timeout=1.0) as client:
        while time.monotonic() - started < timeout_s:
            for url in urls:
                try:
                    body = (await client.get(f"{url}/admin/v1/cluster")).json()
                except (httpx.HTTPError, ValueError):
                    continue
                controller = body.get("controller")
                if controller and controller["coordinator_id"] != exclude:
                    return controller["coordinator_id"], time.monotonic() - started
            await asyncio.sleep(0.05)
    raise AssertionError(f"no controller (other than {exclude}) within {timeout_s} s")
