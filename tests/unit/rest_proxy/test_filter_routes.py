"""``filter=`` on the proxy's consume routes, in process (the proxy app and a real broker app):
the stateless read, a member's poll through the fast lane and through FastAPI, and Confluent
v2's records. Only matching records come back, positions and commits move past the dropped
ones, a long read keeps scanning until a record matches, and a bad filter is refused before
anything moves. (The SSE and WebSocket streams with a filter: tests/integration/rest_proxy/
test_filters.py; the poll's and the reader's decisions: tests/unit/rest_proxy/consume/.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.unit.rest_proxy.inprocess import proxy_and_broker
from tests.unit.rest_proxy.test_fast_lane import POLL, Proxy
from yak.api.records import FETCH_MEDIA_TYPE
from yak_rest_proxy.settings import ProxySettings

READ = "/api/v1/topics/t/partitions/0/records"
V2 = {"content-type": "application/vnd.kafka.v2+json"}
COUNT = 30
BAD = 'key == "a" and\n  (value.n > "x" or)'


@pytest.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[Proxy]:
    async with proxy_and_broker(tmp_path, ProxySettings()) as (client, app):
        assert (await client.get("/healthz")).status_code == 200  # builds the middleware stack
        await produce(Proxy(client, app), [{"n": i} for i in range(COUNT)])
        yield Proxy(client, app)


async def produce(proxy: Proxy, values: list[Any]) -> None:
    answer = await proxy.client.post(
        "/api/v1/topics/t/records", json={"records": [{"value": v} for v in values]}
    )
    assert answer.status_code == 200, answer.text


async def member(proxy: Proxy, name: str = "m1") -> str:
    """A v2 instance of group ``g`` assigned ``t``-0 by hand (no coordinator runs here)."""
    created = await proxy.client.post(
        "/consumers/g",
        json={"name": name, "format": "json", "auto.offset.reset": "earliest"},
        headers=V2,
    )
    assert created.status_code == 200, created.text
    assigned = await proxy.client.post(
        f"/consumers/g/instances/{name}/assignments",
        json={"partitions": [{"topic": "t", "partition": 0}]},
        headers=V2,
    )
    assert assigned.status_code == 204, assigned.text
    return name


async def committed(proxy: Proxy, name: str) -> int:
    answer = await proxy.client.request(
        "GET",
        f"/consumers/g/instances/{name}/offsets",
        json={"partitions": [{"topic": "t", "partition": 0}]},
        headers=V2,
    )
    assert answer.status_code == 200, answer.text
    (entry,) = answer.json()["offsets"]
    offset: int = entry["offset"]
    return offset


async def poll(proxy: Proxy, name: str, *, lane: bool, **params: str) -> list[Any]:
    """The values a member's poll answered, through the fast lane or (``paused`` of another
    partition: not plain) FastAPI — checked to be the one that served it."""
    served = proxy.lane().served
    query = {"timeout_ms": "0", **params} | ({} if lane else {"paused": "t:9"})
    answer = await proxy.client.get(POLL.format(member=name), params=query)
    assert answer.status_code == 200, answer.text
    assert proxy.lane().served == served + (1 if lane else 0)
    return [r["value"]["n"] for r in answer.json()["records"]]


async def test_a_stateless_read_returns_matches_and_moves_past_the_rest(proxy: Proxy) -> None:
    read = await proxy.client.get(READ, params={"offset": 0, "filter": "value.n % 1 == 0"})
    assert read.status_code == 400  # no arithmetic in the language: refused, not ignored
    read = await proxy.client.get(READ, params={"offset": 0, "filter": "value.n in [3, 17]"})
    assert read.status_code == 200, read.text
    body = read.json()
    assert [r["offset"] for r in body["records"]] == [3, 17]
    assert body["next_offset"] == body["high_watermark"] == COUNT
    none = await proxy.client.get(READ, params={"offset": 5, "filter": "value.n == -1"})
    assert none.json()["records"] == []
    assert none.json()["next_offset"] == COUNT  # scanned: never stuck at 5


async def test_a_long_filtered_read_keeps_scanning_until_a_record_matches(proxy: Proxy) -> None:
    read = asyncio.ensure_future(
        proxy.client.get(
            READ, params={"offset": 0, "timeout_ms": 10_000, "filter": 'value.tag == "late"'}
        )
    )
    await produce(proxy, [{"n": -1}, {"tag": "late"}])
    answer = await asyncio.wait_for(read, 10)
    assert [r["value"] for r in answer.json()["records"]] == [{"tag": "late"}]
    assert answer.json()["next_offset"] == COUNT + 2


@pytest.mark.parametrize("lane", [True, False])
async def test_a_filtered_poll_moves_and_commits_past_dropped_records(
    proxy: Proxy, lane: bool
) -> None:
    name = await member(proxy)
    assert await poll(proxy, name, lane=lane, filter="value.n >= 28 or value.n == 3") == [
        3,
        28,
        29,
    ]
    commit = await proxy.client.post(f"/api/v1/groups/g/members/{name}/commit", json={})
    assert commit.status_code == 200, commit.text
    assert await committed(proxy, name) == COUNT
    await produce(proxy, [{"n": COUNT}])
    assert await poll(proxy, name, lane=lane) == [COUNT]  # the position was past the rest


@pytest.mark.parametrize("lane", [True, False])
async def test_a_poll_that_matched_nothing_answers_empty_with_its_position_moved(
    proxy: Proxy, lane: bool
) -> None:
    name = await member(proxy)
    assert await poll(proxy, name, lane=lane, filter='headers.kind == "none"') == []
    assert await poll(proxy, name, lane=lane) == []  # nothing left below the end
    await proxy.client.post(f"/api/v1/groups/g/members/{name}/commit", json={})
    assert await committed(proxy, name) == COUNT


async def test_a_filtered_poll_asking_for_binary_is_answered_in_json(proxy: Proxy) -> None:
    name = await member(proxy)
    answer = await proxy.client.get(
        POLL.format(member=name),
        params={"timeout_ms": "0", "filter": "value.n == 4"},
        headers={"accept": f"{FETCH_MEDIA_TYPE}, application/json;q=0.5"},
    )
    assert answer.headers["content-type"] == "application/json"
    assert [r["value"] for r in answer.json()["records"]] == [{"n": 4}]


async def test_confluent_v2_records_take_the_filter(proxy: Proxy) -> None:
    name = await member(proxy)
    answer = await proxy.client.get(
        f"/consumers/g/instances/{name}/records",
        params={"filter": "value.n < 2"},
        headers={"accept": "application/vnd.kafka.json.v2+json"},
    )
    assert answer.status_code == 200, answer.text
    assert [r["value"] for r in answer.json()] == [{"n": 0}, {"n": 1}]
    bad = await proxy.client.get(
        f"/consumers/g/instances/{name}/records",
        params={"filter": BAD},
        headers={"accept": "application/vnd.kafka.json.v2+json"},
    )
    assert (bad.status_code, bad.json()["error_code"]) == (400, 400)
    assert "line 2, column 20" in bad.json()["message"]


@pytest.mark.parametrize(
    ("path", "lane"),
    [(READ, False), (POLL.format(member="m1"), True), (POLL.format(member="m1"), False),
     ("/api/v1/groups/g/members/m1/stream", False)],
)  # fmt: skip
async def test_a_bad_filter_is_400_and_nothing_moves(proxy: Proxy, path: str, lane: bool) -> None:
    name = await member(proxy)
    served = proxy.lane().served
    query = {"timeout_ms": "0", "filter": BAD} | ({} if lane else {"paused": "t:9"})
    if path == READ:
        query = {"filter": BAD}
    answer = await proxy.client.get(path, params=query)
    assert proxy.lane().served == served + (1 if lane else 0)
    assert answer.status_code == 400, answer.text
    assert answer.json()["code"] == "INVALID_FILTER"
    assert answer.json()["details"] | {"expected": None} == {
        "position": 34,
        "line": 2,
        "column": 20,
        "expected": None,
    }
    too_large = await proxy.client.get(path, params=query | {"filter": "key == 1 or " * 400})
    assert (too_large.status_code, too_large.json()["code"]) == (400, "FILTER_TOO_LARGE")
    assert len(await poll(proxy, name, lane=True)) == COUNT  # the position had not moved
