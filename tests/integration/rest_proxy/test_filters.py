"""Server-side filters on a real cluster: 1,000 JSON records, read with equality filters through
the stateless read, a group member's poll, SSE, the WebSocket and the SDK. Each path returns
exactly what a plain-Python filter of the produced records keeps, and positions and commits
end at the log end (the dropped records count as read). A malformed filter is 400 with its
position, and the member's position stays where it was."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest
import websockets

from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import create_topic, unique
from tests.integration.rest_proxy.test_native_groups import assigned, join
from yak.sdk import AsyncConsumer, AsyncPartitionReader

pytestmark = pytest.mark.integration

#: Makes only its own topics and groups: the package's shared cluster (conftest.py).
SHARED_CLUSTER = True

COUNT = 1_000
PARTITIONS = 2
#: Records 0-999 spread over the partitions by n % PARTITIONS; ``m`` is n % 7, ``tag`` n % 3.
VALUES: list[dict[str, Any]] = [{"n": n, "m": n % 7, "tag": f"t{n % 3}"} for n in range(COUNT)]


def expected(keep: Any) -> list[int]:
    return sorted(v["n"] for v in VALUES if keep(v))


@pytest.fixture(scope="module")
def topic(cluster: LocalCluster) -> str:
    """One topic holding ``VALUES``, produced once for the module's tests."""
    name = unique("flt")
    asyncio.run(create_topic(cluster, name, partitions=PARTITIONS))
    with httpx.Client(base_url=cluster.proxy_url(0), timeout=30) as http:
        for start in range(0, COUNT, 250):
            chunk = VALUES[start : start + 250]
            records = [{"value": v, "partition": v["n"] % PARTITIONS} for v in chunk]
            answer = http.post(f"/api/v1/topics/{name}/records", json={"records": records})
            assert answer.status_code == 200, answer.text
    return name


async def committed(http: httpx.AsyncClient, group: str) -> dict[int, int]:
    described = (await http.get(f"/api/v1/groups/{group}")).json()
    return {p["partition"]: p["committed_offset"] for p in described["partitions"]}


ENDS = dict.fromkeys(range(PARTITIONS), COUNT // PARTITIONS)


async def test_the_stateless_read(cluster: LocalCluster, topic: str) -> None:
    got: list[int] = []
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as http:
        for partition in range(PARTITIONS):
            offset, pages = 0, 0
            while True:
                page = (
                    await http.get(
                        f"/api/v1/topics/{topic}/partitions/{partition}/records",
                        params={"offset": offset, "max_bytes": 2_000, "filter": "value.m == 3"},
                    )
                ).json()
                got += [r["value"]["n"] for r in page["records"]]
                assert page["next_offset"] > offset or offset == page["high_watermark"]
                offset, pages = page["next_offset"], pages + 1
                if offset == page["high_watermark"]:
                    break
            assert offset == ENDS[partition]
            assert pages > 1  # several reads, some of them maybe empty, all moving on
    assert sorted(got) == expected(lambda v: v["m"] == 3)


async def test_a_group_member_and_its_commit(cluster: LocalCluster, topic: str) -> None:
    group = unique("g")
    want = expected(lambda v: v["tag"] == "t1" and v["m"] != 0)
    async with httpx.AsyncClient(base_url=cluster.proxy_url(1), timeout=30) as http:
        member = await join(http, group, topic)
        await assigned(http, group, member, PARTITIONS)
        base = f"/api/v1/groups/{group}/members/{member}"
        params: dict[str, str | int] = {
            "timeout_ms": 1_000,
            "filter": 'value.tag == "t1" and value.m != 0',
        }
        got: list[int] = []
        while len(got) < len(want):
            answer = await http.get(f"{base}/records", params=params)
            assert answer.status_code == 200, answer.text
            got += [r["value"]["n"] for r in answer.json()["records"]]
        assert sorted(got) == want
        last = await http.get(f"{base}/records", params=params | {"timeout_ms": 500})
        assert last.json()["records"] == []  # scans what is left after the last match
        assert (await http.post(f"{base}/commit", json={})).status_code == 200
        assert await committed(http, group) == ENDS


async def test_server_sent_events(cluster: LocalCluster, topic: str) -> None:
    group = unique("g")
    want = expected(lambda v: v["n"] in (5, 500, 999))
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as http:
        member = await join(http, group, topic)
        await assigned(http, group, member, PARTITIONS)
        base = f"/api/v1/groups/{group}/members/{member}"
        got: list[int] = []
        stream_params = {"filter": "value.n in [5, 500, 999]"}
        async with http.stream("GET", f"{base}/stream", params=stream_params) as stream:
            event = None
            async for line in stream.aiter_lines():
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: ") and event == "records":
                    got += [r["value"]["n"] for r in orjson.loads(line[6:])["records"]]
                elif line == ": idle" and len(got) >= len(want):
                    break  # a poll that found nothing more: everything was scanned
        assert sorted(got) == want
        assert (await http.post(f"{base}/commit", json={})).status_code == 200
        assert await committed(http, group) == ENDS


async def test_the_websocket(cluster: LocalCluster, topic: str) -> None:
    group = unique("g")
    want = expected(lambda v: v["m"] == 6)
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as http:
        member = await join(http, group, topic)
        await assigned(http, group, member, PARTITIONS)
    url = cluster.proxy_url(0).replace("http://", "ws://")
    path = f"{url}/api/v1/groups/{group}/members/{member}/ws"
    async with websockets.connect(f"{path}?filter=value.m%20%3D%3D%206") as socket:
        got: list[int] = []
        while len(got) < len(want):
            await socket.send(orjson.dumps({"type": "poll", "timeout_ms": 1_000}).decode())
            reply = orjson.loads(await socket.recv())
            assert reply["type"] == "records", reply
            got += [r["value"]["n"] for r in reply["records"]]
        assert sorted(got) == want
    async with websockets.connect(f"{path}?filter=value.m%20%3D%3D") as socket:
        error = orjson.loads(await socket.recv())
        assert (error["type"], error["code"]) == ("error", "INVALID_FILTER")
        assert error["details"]["column"] == 11  # the end of "value.m =="


async def test_the_sdk(cluster: LocalCluster, topic: str) -> None:
    group = unique("g")
    want = expected(lambda v: v["m"] == 0 or v["tag"] == "t2")
    text = 'value.m == 0 or value.tag == "t2"'
    async with AsyncConsumer(
        cluster.proxy_url(1), group, topic, auto_offset_reset="earliest", filter=text
    ) as consumer:
        got: list[int] = []
        while len(got) < len(want):
            got += [orjson.loads(r.value or b"")["n"] for r in await consumer.poll(1_000)]
        assert sorted(got) == want
        assert await consumer.poll(500) == []
        await consumer.commit()
    async with httpx.AsyncClient(base_url=cluster.proxy_url(1), timeout=30) as http:
        assert await committed(http, group) == ENDS
    async with AsyncPartitionReader(cluster.proxy_url(0), filter="value.n == 998") as reader:
        read = await reader.read(topic, 0, 0, max_bytes=1 << 20)
        assert [orjson.loads(r.value or b"")["n"] for r in read.records] == [998]
        assert read.next_offset == ENDS[0]


async def test_a_malformed_filter_is_400_and_the_position_stays(
    cluster: LocalCluster, topic: str
) -> None:
    group = unique("g")
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as http:
        member = await join(http, group, topic)
        await assigned(http, group, member, PARTITIONS)
        base = f"/api/v1/groups/{group}/members/{member}"
        bad = await http.get(
            f"{base}/records", params={"filter": "value.n == 1 and (", "timeout_ms": 0}
        )
        assert bad.status_code == 400, bad.text
        assert bad.json()["code"] == "INVALID_FILTER"
        assert bad.json()["details"]["position"] == 18
        read = await http.get(
            f"/api/v1/topics/{topic}/partitions/0/records", params={"filter": "nope"}
        )
        assert (read.status_code, read.json()["code"]) == (400, "INVALID_FILTER")
        first = await http.get(f"{base}/records", params={"timeout_ms": 5_000})
        offsets = {(r["partition"], r["offset"]) for r in first.json()["records"]}
        assert offsets
        assert min(o for _, o in offsets) == 0  # read from the start: nothing had moved
