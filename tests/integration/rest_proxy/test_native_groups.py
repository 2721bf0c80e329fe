"""Native group consumption against a real cluster: join, long-poll, epoch-fenced commits,
paused partitions, and the two streaming forms (Server-Sent Events and WebSocket)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import orjson
import pytest
import websockets

from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import create_topic, unique

pytestmark = pytest.mark.integration

#: Makes only its own topics and groups: the package's shared cluster (conftest.py).
SHARED_CLUSTER = True


async def join(http: httpx.AsyncClient, group: str, topic: str, **extra: Any) -> str:
    answer = await http.post(
        f"/api/v1/groups/{group}/members",
        json={"topics": [topic], "auto_offset_reset": "earliest", **extra},
    )
    assert answer.status_code == 201, answer.text
    member: str = answer.json()["member_id"]
    return member


async def assigned(http: httpx.AsyncClient, group: str, member: str, count: int) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while True:
        info: dict[str, Any] = (await http.get(f"/api/v1/groups/{group}/members/{member}")).json()
        if sum(len(a["partitions"]) for a in info["assignment"]) == count:
            return info
        assert time.monotonic() < deadline, info
        await asyncio.sleep(0.1)  # the coordinator is another process


async def produce(http: httpx.AsyncClient, topic: str, values: list[Any]) -> None:
    answer = await http.post(
        f"/api/v1/topics/{topic}/records", json={"records": [{"value": v} for v in values]}
    )
    assert answer.status_code == 200, answer.text


async def test_poll_commit_fencing_and_pause(cluster: LocalCluster) -> None:
    topic, group = unique("nat"), unique("g")
    await create_topic(cluster, topic, partitions=2)
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as http:
        member = await join(http, group, topic)
        info = await assigned(http, group, member, 2)
        base = f"/api/v1/groups/{group}/members/{member}"
        for partition in (0, 1):
            answer = await http.post(
                f"/api/v1/topics/{topic}/records",
                json={
                    "records": [
                        {"value": f"p{partition}-{i}", "partition": partition} for i in range(5)
                    ]
                },
            )
            assert answer.status_code == 200
        paused = await http.get(
            f"{base}/records", params={"timeout_ms": 2000, "paused": f"{topic}:0"}
        )
        assert {r["partition"] for r in paused.json()["records"]} == {1}
        rest = await http.get(f"{base}/records", params={"timeout_ms": 2000})
        assert {r["partition"] for r in rest.json()["records"]} == {0}
        epoch = rest.json()["member_epoch"]
        assert epoch == info["member_epoch"]

        stale = await http.post(
            f"{base}/commit",
            json={
                "member_epoch": epoch + 7,
                "offsets": [{"topic": topic, "partition": 0, "offset": 5}],
            },
        )
        assert (stale.status_code, stale.json()["code"]) == (409, "FENCED_MEMBER_EPOCH")
        ok = await http.post(
            f"{base}/commit",
            json={
                "member_epoch": epoch,
                "offsets": [{"topic": topic, "partition": 0, "offset": 5}],
            },
        )
        assert ok.status_code == 200, ok.text
        described = (await http.get(f"/api/v1/groups/{group}")).json()
        lags = {p["partition"]: p["committed_offset"] for p in described["partitions"]}
        assert lags[0] == 5
        assert (await http.delete(base)).status_code == 204


async def test_server_sent_events_stream(cluster: LocalCluster) -> None:
    topic, group = unique("sse"), unique("g")
    await create_topic(cluster, topic, partitions=1)
    async with httpx.AsyncClient(base_url=cluster.proxy_url(1), timeout=30) as http:
        member = await join(http, group, topic)
        await assigned(http, group, member, 1)
        await produce(http, topic, [f"event-{i}" for i in range(3)])
        got: list[Any] = []
        async with http.stream("GET", f"/api/v1/groups/{group}/members/{member}/stream") as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            event = None
            async for line in stream.aiter_lines():
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: ") and event == "records":
                    got += orjson.loads(line.removeprefix("data: "))["records"]
                    if len(got) >= 3:
                        break
        assert [r["value"] for r in got] == ["event-0", "event-1", "event-2"]


async def test_websocket_pull_stream(cluster: LocalCluster) -> None:
    topic, group = unique("ws"), unique("g")
    await create_topic(cluster, topic, partitions=1)
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as http:
        member = await join(http, group, topic)
        await assigned(http, group, member, 1)
        await produce(http, topic, list(range(4)))
    url = cluster.proxy_url(0).replace("http://", "ws://")
    async with websockets.connect(f"{url}/api/v1/groups/{group}/members/{member}/ws") as socket:
        got: list[Any] = []
        while len(got) < 4:
            await socket.send(orjson.dumps({"type": "poll", "timeout_ms": 2000}).decode())
            reply = orjson.loads(await socket.recv())
            assert reply["type"] == "records", reply
            got += reply["records"]
        assert [r["value"] for r in got] == [0, 1, 2, 3]
        await socket.send(orjson.dumps({"type": "commit"}).decode())
        assert orjson.loads(await socket.recv())["type"] == "committed"
        await socket.send(orjson.dumps({"type": "dance"}).decode())
        error = orjson.loads(await socket.recv())
        assert (error["type"], error["code"]) == ("error", "INVALID_REQUEST")
