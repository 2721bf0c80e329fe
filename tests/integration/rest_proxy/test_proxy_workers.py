"""``yak-rest-proxy --workers N``: N processes serve one port (SO_REUSEPORT), each a whole proxy;
SIGTERM stops them all."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
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


def _scrape(url: str, workers: list[int]) -> tuple[int, str]:
    """``GET /metrics`` over a fresh connection; the worker that holds its server side, and the
    answer."""
    host, port = httpx.URL(url).host, httpx.URL(url).port
    assert port is not None
    with socket.create_connection((host, port), timeout=30) as conn:
        client_port = conn.getsockname()[1]
        inode = _server_socket_inode(port, client_port)  # before the server may answer and close
        owner = next(pid for pid in workers if _holds_socket(pid, inode))
        conn.sendall(f"GET /metrics HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    return owner, body.decode()


def _server_socket_inode(server_port: int, client_port: int) -> str:
    """The inode of the accepted socket from ``client_port`` to ``server_port`` (IPv4 loopback)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if int(local.split(":")[1], 16) == server_port and (
                int(remote.split(":")[1], 16) == client_port and inode != "0"
            ):
                return inode
        time.sleep(0.01)  # accepted by the kernel, not yet by a worker: no event to wait on
    raise AssertionError(f"no accepted socket from port {client_port}")


def _holds_socket(pid: int, inode: str) -> bool:
    target = f"socket:[{inode}]"
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd) == target:
                return True
        except FileNotFoundError:
            continue
    return False


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
    # Each scrape goes over a socket whose server side we find in /proc: the worker that owns it
    # answered. Both workers serve, and their counters add up to at least the 40 requests.
    counts: dict[int, float] = {}
    for _ in range(20):
        pid, metrics = await asyncio.to_thread(_scrape, url, workers)
        (count,) = (float(v) for v in _HEALTHZ_COUNT.findall(metrics))
        counts[pid] = count
    assert sorted(counts) == sorted(workers), counts
    assert sum(counts.values()) >= 40, counts
    async with httpx.AsyncClient(base_url=url, timeout=30) as proxy:
        read = await proxy.get(f"/api/v1/topics/{topic}/partitions/0/records", params={"offset": 0})
    assert [r["value"] for r in read.json()["records"]] == [0, 10, 20, 30]
    os.kill(process.pid, signal.SIGTERM)
    assert await asyncio.to_thread(_gone, workers, 20.0) == []
    await asyncio.to_thread(process.popen.wait, 20)
    cluster.proxies.pop(7, None)
