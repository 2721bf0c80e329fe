"""The compose topology without containers: ``yak up --brokers 3 --coordinators 2
--proxies 2`` on real processes. Records produced through one proxy are consumed through the
other (proxies are stateless: the group lives in etcd), and when the active coordinator is
killed the standby takes over and the cluster keeps answering admin requests."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.ports import free_base_port, layout_offsets
from yak.sdk import AsyncAdmin, AsyncConsumer, AsyncProducer

pytestmark = pytest.mark.integration

RECORDS = 300


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _start(tmp_path: Path, base: int) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    argv = [
        str(Path(sys.executable).with_name("yak")),
        *("up", "--data-dir", str(tmp_path), "--base-port", str(base)),
        *("--brokers", "3", "--coordinators", "2", "--proxies", "2"),
        "--no-restart",  # the killed coordinator stays down: the standby must take over
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:  # blocks until `yak up` reports each process
        lines.append(line)
        if "is up" in line:
            return proc, json.loads((tmp_path / "cluster.json").read_text())
    proc.wait()
    pytest.fail("yak up exited before the cluster was up:\n" + "".join(lines))


async def _produce_and_consume(proxy_a: str, proxy_b: str) -> None:
    async with AsyncAdmin(proxy_b) as admin:
        await admin.create_topic("orders", partitions=3, replication_factor=3)
    values = {f"order-{i}".encode() for i in range(RECORDS)}
    async with AsyncProducer(proxy_a, linger_ms=2) as producer:
        futures = [await producer.send("orders", v, key=v[-1:]) for v in sorted(values)]
        delivered = await asyncio.gather(*futures)
    assert {m.partition for m in delivered} == {0, 1, 2}

    seen: list[bytes] = []
    async with AsyncConsumer(
        proxy_b, "billing", ["orders"], auto_offset_reset="earliest"
    ) as consumer:
        deadline = time.monotonic() + 30
        while len(seen) < RECORDS and time.monotonic() < deadline:
            seen += [bytes(r.value or b"") for r in await consumer.poll(timeout_ms=1_000)]
        await consumer.commit()
    assert len(seen) == RECORDS
    assert set(seen) == values


async def _controller(client: httpx.AsyncClient, url: str) -> str | None:
    try:
        body = (await client.get(f"{url}/admin/v1/cluster")).json()
    except (httpx.HTTPError, ValueError):
        return None
    controller = body.get("controller")
    return str(controller["coordinator_id"]) if controller else None


async def _wait_for_controller(url: str, exclude: str | None, timeout_s: float) -> str:
    """Poll a coordinator's ``/admin/v1/cluster`` (another process's state: nothing to await
    locally) until it names a controller other than ``exclude``."""
    async with httpx.AsyncClient(timeout=1.0) as client:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            controller = await _controller(client, url)
            if controller is not None and controller != exclude:
                return controller
            await asyncio.sleep(0.1)
    raise AssertionError(f"{url}: no controller other than {exclude} within {timeout_s} s")


async def _fail_over(coordinators: dict[str, dict[str, Any]], proxy: str) -> tuple[str, str]:
    """Kill -9 the active coordinator; return (killed id, new controller id)."""
    any_url = next(iter(coordinators.values()))["url"]
    active = await _wait_for_controller(any_url, None, 15)
    os.kill(coordinators[active]["pid"], signal.SIGKILL)
    (standby,) = (c for c in coordinators if c != active)
    new = await _wait_for_controller(coordinators[standby]["url"], active, 20)
    # The proxy forwards admin requests to whichever coordinator is in charge now.
    async with AsyncAdmin(proxy) as admin:
        created = await admin.create_topic("after-failover", partitions=2, replication_factor=3)
    assert len(created.partitions) == 2
    return active, new


def test_three_brokers_two_coordinators_two_proxies(tmp_path: Path) -> None:
    base = free_base_port(layout_offsets(brokers=3, coordinators=2, proxies=2))
    proc, cluster = _start(tmp_path, base)
    try:
        by_name = {p["name"]: p for p in cluster["processes"]}
        assert sorted(by_name) == sorted(
            [
                *(f"coordinator-{i}" for i in range(2)),
                *(f"broker-{i}" for i in range(3)),
                "rest-proxy",
                "rest-proxy-1",
                "console",
            ]
        )
        proxy_a, proxy_b = by_name["rest-proxy"]["url"], by_name["rest-proxy-1"]["url"]
        assert (proxy_a, proxy_b) == (
            f"http://127.0.0.1:{base + 30}",
            f"http://127.0.0.1:{base + 31}",
        )
        asyncio.run(_produce_and_consume(proxy_a, proxy_b))

        coordinators = {
            name.rsplit("-", 1)[1]: by_name[name]
            for name in by_name
            if name.startswith("coordinator-")
        }
        killed, new = asyncio.run(_fail_over(coordinators, proxy_a))
        assert new != killed

        pids = [cluster["etcd"]["pid"], *(p["pid"] for p in cluster["processes"])]
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, rest
        assert f"coordinator-{killed} exited" in rest
        assert not [pid for pid in pids if _pid_alive(pid)]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
