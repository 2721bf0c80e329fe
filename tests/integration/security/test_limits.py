"""Limits against slow, greedy and guessing clients, on a real cluster.

* Slowloris: a client trickling its request headers gets 408 and a closed connection after
  ``YAK_REQUEST_HEADER_TIMEOUT_MS`` on the proxy, the console and the coordinator.
* Quotas honoured by the SDK: the producer, the group consumer and the partition reader of
  ``yak.sdk`` finish their work through a proxy with small produce and fetch quotas (their
  requests meet 429s and wait out ``Retry-After``), at about the quota's rate.
* Streams count: an SSE ``/stream`` and a WebSocket ``/ws`` consumer are held to the fetch
  quota too.
* Failed logins: after ``YAK_AUTH_MAX_FAILURES`` wrong Basic passwords a user is refused with
  429 ``AUTHENTICATION_THROTTLED`` and ``Retry-After`` (both dialects); other credentials work.

Proxy 0 (security off) has the quotas, proxy 1 (security on) the login limit.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

import httpx
import pytest
from websockets.asyncio.client import connect

from loadtest.local_cluster import LocalCluster, local_cluster
from tests.integration.rest_proxy.conftest import V2, unique
from tests.integration.rest_proxy.test_security import _cli
from tests.integration.security.helpers import ready_topic
from yak.etcd_server import EmbeddedEtcd
from yak.sdk import AsyncConsumer, AsyncPartitionReader, AsyncProducer

pytestmark = pytest.mark.integration

HEADER_TIMEOUT_MS = 1_000
QUOTA = 20_000  # bytes per second, produce and fetch
RECORDS = 40
VALUE = 1_000  # bytes per record: RECORDS * VALUE is two seconds of quota
MAX_FAILURES = 3


class Limits(NamedTuple):
    cluster: LocalCluster
    admin_key: str


@pytest.fixture(scope="module")
def limits(tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd) -> Iterator[Limits]:
    folder: Path = tmp_path_factory.mktemp("limits")
    cluster_id = f"lim-{uuid.uuid4().hex[:8]}"
    output = _cli(
        *("users", "create", "admin", "--bootstrap"),
        *("--etcd", etcd.endpoint, "--cluster-id", cluster_id),
    )
    admin_key = output.strip().splitlines()[-1]
    slow = {"YAK_REQUEST_HEADER_TIMEOUT_MS": str(HEADER_TIMEOUT_MS)}
    with local_cluster(folder, etcd, cluster_id, brokers=1, coordinator_env=slow) as running:
        running.start_proxy(
            0,
            YAK_QUOTA_PRODUCE_BYTES_PER_S=str(QUOTA),
            YAK_QUOTA_FETCH_BYTES_PER_S=str(QUOTA),
            **slow,
        )
        running.start_proxy(
            1,
            YAK_SECURITY="on",
            YAK_SUPER_USERS="User:admin",
            YAK_AUTH_MAX_FAILURES=str(MAX_FAILURES),
            YAK_AUTH_FAILURE_WINDOW_S="300",
        )
        running.start_console(0, **slow)
        yield Limits(running, admin_key)


async def _trickle_headers(url: str) -> tuple[bytes, float]:
    """Send request headers a byte every 0.2 s; the answer and how long until the close."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    started = time.monotonic()
    head = b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-slow: " + b"a" * 1_000

    async def trickle() -> None:
        for byte in head:
            writer.write(bytes([byte]))
            await asyncio.sleep(0.2)  # the slow client itself

    sending = asyncio.create_task(trickle())
    try:
        answer = await asyncio.wait_for(reader.read(), 10)  # until the server closes
    finally:
        sending.cancel()
        writer.close()
    return answer, time.monotonic() - started


async def test_slow_headers_are_cut_off_on_every_public_listener(limits: Limits) -> None:
    cluster = limits.cluster
    urls = {
        "rest-proxy": cluster.proxy_url(0),
        "console": cluster.console_url,
        "coordinator": cluster.coordinator_url,
    }
    results = await asyncio.gather(*(_trickle_headers(url) for url in urls.values()))
    for service, (answer, elapsed) in zip(urls, results, strict=True):
        assert answer.startswith(b"HTTP/1.1 408"), (service, answer)
        assert 0.9 * HEADER_TIMEOUT_MS / 1000 <= elapsed < HEADER_TIMEOUT_MS / 1000 + 2, service
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0)) as client:
        assert (await client.get("/healthz")).status_code == 200  # a normal client is served


async def test_the_sdk_waits_out_429s_and_gets_its_quota(limits: Limits) -> None:
    cluster = limits.cluster
    topic = unique("throttled")
    await ready_topic(cluster, topic)
    url = cluster.proxy_url(0)
    started = time.monotonic()
    async with AsyncProducer(url, linger_ms=0, batch_max_bytes=4 * VALUE) as producer:
        sent = [await producer.send(topic, b"p" * VALUE) for _ in range(RECORDS)]
        await producer.flush()
    assert [f.result().offset for f in sent] == list(range(RECORDS))
    produce_s = time.monotonic() - started

    started = time.monotonic()
    read = 0
    async with AsyncPartitionReader(url) as reader:
        while read < RECORDS:
            batch = await reader.read(topic, 0, read, max_bytes=4 * VALUE)
            read = batch.next_offset
    read_s = time.monotonic() - started

    started = time.monotonic()
    polled: list[int] = []
    group = unique("throttled")
    async with AsyncConsumer(
        url, group, topic, auto_offset_reset="earliest", max_bytes=4 * VALUE
    ) as consumer:
        while len(polled) < RECORDS:
            polled += [r.offset for r in await consumer.poll(timeout_ms=2_000)]
    poll_s = time.monotonic() - started
    assert polled == list(range(RECORDS))
    print(
        f"\n{RECORDS * VALUE:,} B at a quota of {QUOTA:,} B/s: produced in {produce_s:.2f} s, "
        f"read in {read_s:.2f} s, polled in {poll_s:.2f} s"
    )
    # One second of burst, then the quota's rate: at least a second for the rest.
    for took in (produce_s, read_s, poll_s):
        assert took >= 0.8 * (RECORDS * VALUE - QUOTA) / QUOTA


async def _member(client: httpx.AsyncClient, group: str, topic: str) -> str:
    joined = await client.post(
        f"/api/v1/groups/{group}/members",
        json={"topics": [topic], "auto_offset_reset": "earliest"},
    )
    assert joined.status_code == 201, joined.text
    member: str = joined.json()["member_id"]
    return member


async def test_streams_are_held_to_the_fetch_quota(limits: Limits) -> None:
    cluster = limits.cluster
    topic = unique("streamed")
    await ready_topic(cluster, topic)
    url = cluster.proxy_url(0)
    async with AsyncProducer(url, linger_ms=0) as producer:  # waits out the produce quota
        for _ in range(RECORDS):
            await producer.send(topic, b"s" * VALUE)
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        await asyncio.sleep(1.5)  # let the shared fetch bucket fill again
        group = unique("sse")
        member = await _member(client, group, topic)
        started = time.monotonic()
        seen = 0
        path = f"/api/v1/groups/{group}/members/{member}/stream"
        async with client.stream("GET", path, params={"max_bytes": 4 * VALUE}) as events:
            async for line in events.aiter_lines():
                if line.startswith("data: "):
                    seen += len(json.loads(line[6:])["records"])
                    if seen >= RECORDS:
                        break
        sse_s = time.monotonic() - started

        await asyncio.sleep(1.5)
        group = unique("ws")
        member = await _member(client, group, topic)
    ws_url = url.replace("http://", "ws://") + f"/api/v1/groups/{group}/members/{member}/ws"
    started = time.monotonic()
    seen = 0
    async with connect(ws_url) as socket:
        while seen < RECORDS:
            await socket.send(
                json.dumps({"type": "poll", "timeout_ms": 2_000, "max_bytes": 4 * VALUE})
            )
            reply = json.loads(await socket.recv())
            assert reply["type"] == "records", reply
            seen += len(reply["records"])
    ws_s = time.monotonic() - started
    print(f"\n{RECORDS * VALUE:,} B of values: SSE in {sse_s:.2f} s, WebSocket in {ws_s:.2f} s")
    for took in (sse_s, ws_s):
        assert took >= 0.8 * (RECORDS * VALUE - QUOTA) / QUOTA


async def test_failed_basic_logins_are_limited(limits: Limits) -> None:
    cluster = limits.cluster
    admin = {"authorization": f"Bearer {limits.admin_key}"}
    async with httpx.AsyncClient(base_url=cluster.proxy_url(1), timeout=30) as client:
        made = await client.post(
            "/api/v1/security/users", json={"name": "bob", "password": "right"}, headers=admin
        )
        assert made.status_code == 201, made.text

        def basic(password: str) -> dict[str, str]:
            token = base64.b64encode(f"bob:{password}".encode()).decode()
            return {"authorization": f"Basic {token}"}

        whoami = "/api/v1/security/whoami"
        for _ in range(MAX_FAILURES):
            wrong = await client.get(whoami, headers=basic("wrong"))
            assert wrong.status_code == 401
        refused = await client.get(whoami, headers=basic("right"))
        assert refused.status_code == 429
        assert refused.json()["code"] == "AUTHENTICATION_THROTTLED"
        assert 200 < int(refused.headers["retry-after"]) <= 300
        v2 = await client.get("/topics", headers={**basic("right"), "accept": V2})
        assert v2.status_code == 429
        assert v2.json()["error_code"] == 42903
        assert (await client.get(whoami, headers=admin)).status_code == 200
