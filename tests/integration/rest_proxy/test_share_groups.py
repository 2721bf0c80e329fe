"""Share groups through the rest-proxy on a real cluster (etcd, a coordinator, 3 brokers, 2
proxies as processes; groups made through the coordinator's admin API): 200 jobs taken by 4
SDK share consumers in parallel, each exactly once; a record not acknowledged comes back once
its lock expires with delivery count 2; a rejected one lands in the dead-letter topic with its
headers; an acknowledgement after the lock expired is 409 ``INVALID_RECORD_STATE`` and changes
nothing; an unknown group is 404 and a malformed filter 400 with its position; the SSE stream
hands records out and the WebSocket takes acknowledgements."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import create_topic, unique
from yak.api.share_groups import CreateShareGroupRequest
from yak.clients.admin import AdminClient
from yak.sdk import AsyncProducer, AsyncShareConsumer, ShareRecord

pytestmark = pytest.mark.integration

#: Makes only its own topics and groups: the package's shared cluster (conftest.py).
SHARED_CLUSTER = True

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "queue_workers.py"


async def _queue(
    cluster: LocalCluster, *, lock_ms: int = 30_000, attempts: int = 5
) -> tuple[str, str, str]:
    """A topic of 3 partitions, its dead-letter topic and a share group reading from the start."""
    topic, dlq, group = unique("jobs"), unique("jobs-dlq"), unique("workers")
    await create_topic(cluster, topic)
    await create_topic(cluster, dlq, partitions=1)
    async with AdminClient(cluster.coordinator_url) as admin:
        await admin.create_share_group(
            CreateShareGroupRequest(
                name=group,
                dead_letter_topic=dlq,
                max_delivery_attempts=attempts,
                lock_duration_ms=lock_ms,
                offset_reset="earliest",
            )
        )
    return topic, dlq, group


async def _produce(cluster: LocalCluster, topic: str, count: int) -> None:
    async with AsyncProducer(cluster.proxy_url(0)) as producer:
        sent = [await producer.send(topic, f"job-{i}".encode()) for i in range(count)]
        await asyncio.gather(*sent)


async def test_four_consumers_take_every_job_exactly_once(cluster: LocalCluster) -> None:
    topic, _, group = await _queue(cluster)
    await _produce(cluster, topic, 200)
    seen: list[bytes | None] = []

    async def worker(index: int) -> None:
        url = cluster.proxy_url(index % 2)
        async with AsyncShareConsumer(url, group, topic, max_records=20) as consumer:
            idle = 0
            while idle < 3:
                records = await consumer.acquire(timeout_ms=1_000)
                idle = 0 if records else idle + 1
                for record in records:
                    seen.append(record.value)
                    await record.ack()

    await asyncio.wait_for(asyncio.gather(*(worker(i) for i in range(4))), 120)
    assert sorted(v or b"" for v in seen) == sorted(f"job-{i}".encode() for i in range(200))


async def test_an_unanswered_record_comes_back_after_its_lock(cluster: LocalCluster) -> None:
    topic, _, group = await _queue(cluster, lock_ms=1_000)
    await _produce(cluster, topic, 1)
    url = cluster.proxy_url(0)
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        first = await _acquire(http, group, topic, "m1", 5_000)
        ((record,),) = [first["records"]]
        assert record["delivery_count"] == 1
        again = await _acquire(http, group, topic, "m2", 10_000)
        assert [(r["offset"], r["delivery_count"]) for r in again["records"]] == [
            (record["offset"], 2)
        ]
        late = await http.post(
            f"/api/v1/share-groups/{group}/acknowledgements",
            json={"member_id": "m1", "acknowledgements": [_entry(record, "accept")]},
        )
        assert late.status_code == 409, late.text
        assert late.json()["code"] == "INVALID_RECORD_STATE"
        done = await http.post(
            f"/api/v1/share-groups/{group}/acknowledgements",
            json={"member_id": "m2", "acknowledgements": [_entry(record, "accept")]},
        )
        assert done.status_code == 200, done.text  # m2's lock was untouched by m1's late ack
        assert done.json()["results"][0]["error"] is None


async def test_batch_optimized_takes_the_whole_batch_and_record_limit_does_not(
    cluster: LocalCluster,
) -> None:
    topic, _, group = await _queue(cluster)
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as http:
        produced = await http.post(  # one request to one partition: one batch of 6
            f"/api/v1/topics/{topic}/records",
            json={"records": [{"value": i, "partition": 1} for i in range(6)]},
        )
        assert produced.status_code == 200, produced.text

        async def acquire(member: str, mode: str) -> list[int]:
            answer = await http.post(
                f"/api/v1/share-groups/{group}/acquire",
                json={
                    "topics": [topic],
                    "member_id": member,
                    "max_records": 2,
                    "acquire_mode": mode,
                    "timeout_ms": 5_000,
                },
            )
            assert answer.status_code == 200, answer.text
            return [r["offset"] for r in answer.json()["records"]]

        assert await acquire("strict", "record_limit") == [0, 1]
        assert await acquire("whole", "batch_optimized") == [2, 3, 4, 5]  # to the batch's end
        bad = await http.post(
            f"/api/v1/share-groups/{group}/acquire",
            json={"topics": [topic], "member_id": "m", "acquire_mode": "all"},
        )
        assert bad.status_code in (400, 422), bad.text


async def test_a_rejected_record_lands_in_the_dead_letter_topic(cluster: LocalCluster) -> None:
    topic, dlq, group = await _queue(cluster)
    await _produce(cluster, topic, 1)
    async with AsyncShareConsumer(cluster.proxy_url(1), group, topic) as consumer:
        records: list[ShareRecord] = []
        while not records:
            records = await consumer.acquire(timeout_ms=2_000)
        await records[0].reject()
        assert await consumer.flush() == []
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as http:
        copies: list[dict[str, Any]] = []
        for _ in range(20):  # copied by the leader in the background: long polls
            answer = await http.get(
                f"/api/v1/topics/{dlq}/partitions/0/records",
                params={"offset": 0, "timeout_ms": 1_000, "value_encoding": "string"},
            )
            copies = answer.json()["records"]
            if copies:
                break
    (copy,) = copies
    headers = {h["key"]: h["value"] for h in copy["headers"]}
    assert copy["value"] == "job-0"
    assert headers["yak-dlq-reason"] == "rejected"
    assert headers["yak-dlq-group"] == group


async def test_unknown_groups_and_bad_filters_are_refused(cluster: LocalCluster) -> None:
    topic, _, group = await _queue(cluster)
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as http:
        unknown = await http.post(
            "/api/v1/share-groups/nobody-here/acquire", json={"topics": [topic], "timeout_ms": 0}
        )
        assert unknown.status_code == 404, unknown.text
        assert unknown.json()["code"] == "GROUP_ID_NOT_FOUND"
        bad = await http.post(
            f"/api/v1/share-groups/{group}/acquire",
            json={"topics": [topic], "timeout_ms": 0, "filter": 'key == "a" and'},
        )
        assert bad.status_code == 400, bad.text
        assert bad.json()["code"] == "INVALID_FILTER"
        assert bad.json()["details"]["position"] == 14


async def test_sse_hands_records_out_and_the_websocket_takes_answers(cluster: LocalCluster) -> None:
    topic, _, group = await _queue(cluster)
    await _produce(cluster, topic, 2)
    url = cluster.proxy_url(0)
    got: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        params = {"topic": topic, "member_id": "sse-1", "value_encoding": "string"}
        async with http.stream("GET", f"/api/v1/share-groups/{group}/stream", params=params) as s:
            event = None
            async for line in s.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "records":
                    got += json.loads(line[6:])["records"]
                    if len(got) >= 2:
                        break
    assert sorted(r["value"] for r in got) == ["job-0", "job-1"]
    ws_url = url.replace("http", "ws", 1)
    path = f"{ws_url}/api/v1/share-groups/{group}/ws?topic={topic}&member_id=sse-1"
    async with websockets.connect(path) as socket:
        entries = [_entry(r, "accept") for r in got]
        await socket.send(json.dumps({"type": "acknowledge", "acknowledgements": entries}))
        answer = json.loads(await socket.recv())
    assert answer["type"] == "acknowledged"
    assert [r["error"] for r in answer["results"]] == [None, None]


async def _acquire(
    http: httpx.AsyncClient, group: str, topic: str, member: str, timeout_ms: int
) -> dict[str, Any]:
    answer = await http.post(
        f"/api/v1/share-groups/{group}/acquire",
        json={"topics": [topic], "member_id": member, "timeout_ms": timeout_ms},
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _entry(record: dict[str, Any], kind: str) -> dict[str, Any]:
    return {
        "topic": record["topic"],
        "partition": record["partition"],
        "offset": record["offset"],
        "type": kind,
    }


async def test_the_worker_pool_example_runs(cluster: LocalCluster) -> None:
    """docs/examples/queue_workers.py: every job done once but the poison one, which is in
    the dead-letter topic (the example asserts both)."""
    spec = importlib.util.spec_from_file_location("example_queue_workers", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    await module.main(cluster.proxy_url(0))
