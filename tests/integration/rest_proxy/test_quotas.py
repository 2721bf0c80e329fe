"""Limits and quotas against a real cluster: one secured proxy with small limits, one broker.

* Produce quota: over it, 429 + ``Retry-After`` in both dialects; a client that waits what it
  is told gets the quota (measured and printed, within ±30 %).
* A per-principal override written through the API applies to the very next request.
* ``RateLimit-*`` headers on answers under the quota and on its 429s.
* The consumer cap per principal, in both dialects, with ``Retry-After``.
* A body that stalls answers 408; too many records, too large a body and a record over the
  topic's ``max.message.bytes`` are refused, and nothing is written; a request larger than
  a segment lands when each of its records fits one.
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from loadtest.local_cluster import LocalCluster, local_cluster
from tests.integration.rest_proxy.conftest import V2, V2_JSON, unique
from tests.integration.rest_proxy.test_security import _acl, _cli
from yak.etcd_server import EmbeddedEtcd

pytestmark = pytest.mark.integration

QUOTA = 40_000  # bytes per second
RECORD = 8_000  # bytes of value per request
MAX_RECORDS = 50
MAX_BODY = 100_000


class Limited:
    """The cluster, the admin's key and helpers."""

    def __init__(self, cluster: LocalCluster, admin_key: str) -> None:
        self.cluster = cluster
        self.admin_key = admin_key

    def client(self, key: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.cluster.proxy_url(0),
            headers={"authorization": f"Bearer {key}"},
            timeout=30,
        )

    async def topic(self, name: str, **configs: str) -> None:
        async with self.client(self.admin_key) as admin:
            body = {"name": name, "partitions": 1, "replication_factor": 1, "configs": configs}
            made = await admin.post("/api/v1/topics", json=body)
            assert made.status_code == 201, made.text
            deadline = time.monotonic() + 20
            while (await admin.get(f"/topics/{name}")).status_code != 200:
                assert time.monotonic() < deadline, name
                await asyncio.sleep(0.05)  # another process's metadata

    async def user(self, name: str, acls: list[dict[str, Any]]) -> str:
        async with self.client(self.admin_key) as admin:
            made = await admin.post("/api/v1/security/users", json={"name": name})
            assert made.status_code == 201, made.text
            added = await admin.post("/api/v1/security/acls", json={"acls": acls})
            assert added.status_code == 201, added.text
        key: str = made.json()["api_key"]["api_key"]
        return key

    async def high_watermark(self, topic: str) -> int:
        async with self.client(self.admin_key) as admin:
            answer = await admin.get(f"/api/v1/topics/{topic}/partitions/0/offsets")
            assert answer.status_code == 200, answer.text
            offset: int = answer.json()["offset"]
            return offset


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd) -> Iterator[Limited]:
    folder: Path = tmp_path_factory.mktemp("quotas")
    cluster_id = f"quo-{uuid.uuid4().hex[:8]}"
    output = _cli(
        *("users", "create", "admin", "--bootstrap"),
        *("--etcd", etcd.endpoint, "--cluster-id", cluster_id),
    )
    admin_key = output.strip().splitlines()[-1]
    with local_cluster(folder, etcd, cluster_id, brokers=1) as running:
        running.start_proxy(
            0,
            YAK_SECURITY="on",
            YAK_SUPER_USERS="User:admin",
            YAK_QUOTA_PRODUCE_BYTES_PER_S=str(QUOTA),
            YAK_MAX_RECORDS_PER_REQUEST=str(MAX_RECORDS),
            YAK_MAX_REQUEST_BYTES=str(MAX_BODY),
            YAK_MAX_CONSUMERS_PER_PRINCIPAL="2",
            YAK_REQUEST_READ_TIMEOUT_MS="1000",
        )
        yield Limited(running, admin_key)


def _writer(principal: str, topic: str) -> list[dict[str, Any]]:
    return [_acl(principal, "TOPIC", topic, "WRITE"), _acl(principal, "TOPIC", topic, "READ")]


def _records(count: int, size: int) -> dict[str, Any]:
    return {"records": [{"value": "x" * size} for _ in range(count)], "value_encoding": "string"}


async def test_produce_quota_throttles_to_its_rate(limited: Limited) -> None:
    topic = unique("quota")
    await limited.topic(topic)
    key = await limited.user("alice", _writer("User:alice", topic))
    path = f"/api/v1/topics/{topic}/records"
    body = _records(1, RECORD)
    async with limited.client(key) as alice:
        throttled_at: list[float] = []
        accepted = 0
        while len(throttled_at) < 5:  # a burst, then four wait-and-send cycles
            answer = await alice.post(path, json=body)
            if answer.status_code == 429:
                assert answer.json()["code"] == "THROTTLING_QUOTA_EXCEEDED"
                wait = int(answer.headers["retry-after"])
                assert 1 <= wait <= 2
                throttled_at.append(time.monotonic())
                await asyncio.sleep(wait)  # the client honours Retry-After
                continue
            assert answer.status_code == 200, answer.text
            if throttled_at:
                accepted += len(answer.request.content)
        for _ in range(20):  # the v2 dialect: 429 with Confluent's rate-limit code
            v2 = await alice.post(
                f"/topics/{topic}",
                json={"records": [{"value": "x" * RECORD}]},
                headers={"content-type": V2_JSON, "accept": V2},
            )
            if v2.status_code != 200:
                break
        assert v2.status_code == 429
        assert v2.json()["error_code"] == 42901
        assert int(v2.headers["retry-after"]) >= 1
    rate = accepted / (throttled_at[-1] - throttled_at[0])
    print(f"\nproduce quota {QUOTA:,} B/s: measured {rate:,.0f} B/s over 4 cycles")
    assert 0.7 * QUOTA <= rate <= 1.3 * QUOTA


async def test_an_override_applies_to_the_next_request(limited: Limited) -> None:
    topic = unique("override")
    await limited.topic(topic)
    key = await limited.user("bob", _writer("User:bob", topic))
    path = f"/api/v1/topics/{topic}/records"
    async with limited.client(limited.admin_key) as admin, limited.client(key) as bob:
        first = await bob.post(path, json=_records(1, 100))
        assert first.status_code == 200
        assert first.headers["ratelimit-limit"] == str(QUOTA)  # burst: one second of quota
        assert 0 < int(first.headers["ratelimit-remaining"]) < QUOTA
        put = await admin.put("/api/v1/security/quotas/User:bob", json={"produce_bytes_per_s": 1})
        assert put.status_code == 200, put.text
        assert put.json()["effective_produce_bytes_per_s"] == 1
        assert (await bob.post(path, json=_records(1, 100))).status_code == 200  # into debt
        refused = await bob.post(path, json=_records(1, 100))
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) > 60
        assert refused.headers["ratelimit-remaining"] == "0"
        assert refused.headers["ratelimit-policy"] == "1;w=1"
        listed = (await admin.get("/api/v1/security/quotas")).json()
        assert listed["default_produce_bytes_per_s"] == QUOTA
        assert [q["principal"] for q in listed["quotas"]] == ["User:bob"]
        assert (await admin.delete("/api/v1/security/quotas/User:bob")).status_code == 204
        assert (await bob.post(path, json=_records(1, 100))).status_code == 200
        assert (await bob.get("/api/v1/security/quotas")).status_code == 403


async def test_consumer_instances_are_capped_per_principal(limited: Limited) -> None:
    group, topic = unique("capped"), unique("capped")
    await limited.topic(topic)
    acls = [_acl("User:carol", "GROUP", group, "READ"), _acl("User:carol", "TOPIC", topic, "READ")]
    key = await limited.user("carol", acls)
    async with limited.client(key) as carol:
        for _ in range(2):
            made = await carol.post(
                f"/consumers/{group}", json={}, headers={"content-type": V2, "accept": V2}
            )
            assert made.status_code == 200, made.text
        v2 = await carol.post(
            f"/consumers/{group}", json={}, headers={"content-type": V2, "accept": V2}
        )
        assert v2.status_code == 429
        assert v2.json()["error_code"] == 42902
        assert v2.headers["retry-after"] == "300"  # the instance timeout: when one may expire
        assert "limit is 2" in v2.json()["message"]
        native = await carol.post(f"/api/v1/groups/{group}/members", json={"topics": [topic]})
        assert native.status_code == 429
        assert native.json()["code"] == "CONSUMER_QUOTA_EXCEEDED"


async def test_a_stalled_body_answers_408(limited: Limited) -> None:
    topic = unique("stalled")
    await limited.topic(topic)
    url = urlsplit(limited.cluster.proxy_url(0))
    assert url.hostname is not None
    assert url.port is not None
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    head = (
        f"POST /api/v1/topics/{topic}/records HTTP/1.1\r\nhost: {url.netloc}\r\n"
        f"authorization: Bearer {limited.admin_key}\r\n"
        "content-type: application/json\r\ncontent-length: 1000\r\n\r\n{"
    )
    started = time.monotonic()
    writer.write(head.encode())
    await writer.drain()
    head_end = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    length = int(head_end.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    answer = head_end + await asyncio.wait_for(reader.readexactly(length), 10)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"REQUEST_BODY_TIMEOUT" in answer
    assert time.monotonic() - started < 5


async def test_oversized_requests_are_refused_and_nothing_is_written(limited: Limited) -> None:
    topic = unique("limits")
    await limited.topic(topic, **{"max.message.bytes": "2000"})
    async with limited.client(limited.admin_key) as admin:
        put = await admin.put("/api/v1/security/quotas/User:admin", json={"produce_bytes_per_s": 0})
        assert put.status_code == 200, put.text
        native = f"/api/v1/topics/{topic}/records"
        many = await admin.post(native, json=_records(MAX_RECORDS + 1, 1))
        assert many.status_code == 413
        assert many.json()["code"] == "TOO_MANY_RECORDS"
        headers = {"content-type": V2_JSON, "accept": V2}
        v2_many = await admin.post(
            f"/topics/{topic}",
            json={"records": [{"value": 1}] * (MAX_RECORDS + 1)},
            headers=headers,
        )
        assert v2_many.status_code == 413
        assert v2_many.json()["error_code"] == 41302
        huge = await admin.post(native, json=_records(1, MAX_BODY + 1))
        assert huge.status_code == 413
        assert huge.json()["code"] == "MESSAGE_TOO_LARGE"
        big = await admin.post(native, json=_records(1, 3000))
        assert big.status_code == 413
        assert "max.message.bytes" in big.json()["message"]
        v2_big = await admin.post(
            f"/topics/{topic}", json={"records": [{"value": "x" * 3000}]}, headers=headers
        )
        assert v2_big.status_code == 413
        assert v2_big.json()["error_code"] == 41301
        session = (await admin.post("/api/v1/producers")).json()
        value = base64.b64encode(b"x" * 700).decode()
        batch = await admin.post(
            f"/api/v1/topics/{topic}/partitions/0/batches",
            json={
                **session,
                "base_sequence": 0,
                "value_encoding": "base64",
                "records": [{"value": value}] * 4,
            },
        )
        assert batch.status_code == 413, batch.text
        assert batch.json()["code"] == "MESSAGE_TOO_LARGE"
    assert await limited.high_watermark(topic) == 0


async def test_a_request_larger_than_a_segment_lands_when_each_record_fits(
    limited: Limited,
) -> None:
    """Segments of 4 KiB and a 40 KB request of 1 KB records: every record lands (the proxy's
    batches fit a segment); a record larger than a segment is refused by its place, naming
    ``segment.bytes``, and nothing of its request is written."""
    topic = unique("segments")
    await limited.topic(topic, **{"segment.bytes": "4096"})
    async with limited.client(limited.admin_key) as admin:
        put = await admin.put("/api/v1/security/quotas/User:admin", json={"produce_bytes_per_s": 0})
        assert put.status_code == 200, put.text
        native = f"/api/v1/topics/{topic}/records"
        fits = await admin.post(native, json=_records(40, 1000))
        assert fits.status_code == 200, fits.text
        assert [r["error"] for r in fits.json()["results"]] == [None] * 40
        too_big = await admin.post(native, json=_records(3, 5000))
        assert too_big.status_code == 413, too_big.text
        assert too_big.json()["code"] == "MESSAGE_TOO_LARGE"
        assert "records[0]" in too_big.json()["message"]
        assert "segment.bytes" in too_big.json()["message"]
    assert await limited.high_watermark(topic) == 40
