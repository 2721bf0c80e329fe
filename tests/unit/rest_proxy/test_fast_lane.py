"""The fast lane serves the plain native produce itself and passes everything else to FastAPI:
both answer the same. In process: the proxy app and a real broker app on an in-memory store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts

from tests.unit.rest_proxy.inprocess import proxy_and_broker
from yak_rest_proxy.api.native import fast_lane
from yak_rest_proxy.api.native.fast_lane import FastLane
from yak_rest_proxy.settings import ProxySettings


@dataclass
class Proxy:
    client: httpx.AsyncClient
    app: FastAPI

    def lane(self) -> FastLane:
        node = getattr(self.app, "front", None)  # ProxyApp: each layer keeps the next as app
        while node is not None and not isinstance(node, FastLane):
            node = getattr(node, "app", None) or getattr(node, "_app", None)
        assert isinstance(node, FastLane)
        return node


@pytest.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[Proxy]:
    async with proxy_and_broker(tmp_path, ProxySettings()) as (client, app):
        assert (await client.get("/healthz")).status_code == 200  # builds the middleware stack
        yield Proxy(client, app)


async def test_the_plain_produce_takes_the_lane(proxy: Proxy) -> None:
    body = {"records": [{"value": {"n": 1}}, {"key": "k", "value": "v"}]}
    for params in ({}, {"acks": "1"}, {"acks": "all"}, {"acks": "0"}):
        answer = await proxy.client.post("/api/v1/topics/t/records", params=params, json=body)
        assert answer.status_code == 200, answer.text
        results = answer.json()["results"]
        assert [r["error"] for r in results] == [None, None]
        assert answer.headers["x-request-id"]  # the observability middleware still ran
    assert proxy.lane().served == 4
    read = await proxy.client.get("/api/v1/topics/t/partitions/0/records", params={"offset": 0})
    assert [r["value"] for r in read.json()["records"]][:2] == [{"n": 1}, "v"]


@pytest.mark.parametrize(
    ("path", "params", "body", "status", "code", "lane"),
    [
        # In the lane: the route's own typed errors, in the native dialect.
        ("/api/v1/topics/nope/records", {}, b'{"records": [{"value": 1}]}', 404,
         "UNKNOWN_TOPIC_OR_PARTITION", True),
        ("/api/v1/topics/t/records", {}, b"{not json", 400, "INVALID_REQUEST", True),
        ("/api/v1/topics/t/records", {}, b'{"records": []}', 400, "INVALID_REQUEST", True),
        # Not plain: FastAPI answers as the documented route does.
        ("/api/v1/topics/t/records", {"acks": "2"}, b'{"records": [{"value": 1}]}', 400,
         "INVALID_REQUEST", False),
        ("/api/v1/topics/t/records", {"acks": "1", "x": "y"}, b'{"records": [{"value": 1}]}',
         200, None, False),
    ],
)  # fmt: skip
async def test_errors_are_the_routes_whoever_serves(
    proxy: Proxy,
    path: str,
    params: dict[str, str],
    body: bytes,
    status: int,
    code: str | None,
    lane: bool,
) -> None:
    answer = await proxy.client.post(
        path, params=params, content=body, headers={"content-type": "application/json"}
    )
    assert answer.status_code == status, answer.text
    if code is not None:
        assert answer.json()["code"] == code
        assert answer.json()["message"]
    assert proxy.lane().served == (1 if lane else 0)


POLL = "/api/v1/groups/g/members/{member}/records"


async def test_a_plain_poll_takes_the_lane_and_answers_as_the_route(proxy: Proxy) -> None:
    joined = await proxy.client.post(
        "/api/v1/groups/g/members", json={"member_id": "m1", "topics": ["t"]}
    )
    assert joined.status_code == 201, joined.text
    served = proxy.lane().served
    lane = await proxy.client.get(POLL.format(member="m1"), params={"timeout_ms": "0"})
    assert proxy.lane().served == served + 1
    # ``paused`` is not plain: the same poll through FastAPI.
    routed = await proxy.client.get(
        POLL.format(member="m1"), params={"timeout_ms": "0", "paused": "t:99"}
    )
    assert proxy.lane().served == served + 1
    assert lane.status_code == routed.status_code == 200, (lane.text, routed.text)
    assert lane.json().keys() == routed.json().keys() == {"member_epoch", "assignment", "records"}
    assert lane.json()["member_epoch"] == routed.json()["member_epoch"]
    assert lane.headers["content-type"] == routed.headers["content-type"]


async def test_a_polls_typed_error_is_the_routes_whoever_serves(proxy: Proxy) -> None:
    served = proxy.lane().served
    lane = await proxy.client.get(POLL.format(member="ghost"), params={"timeout_ms": "0"})
    assert proxy.lane().served == served + 1
    routed = await proxy.client.get(
        POLL.format(member="ghost"), params={"timeout_ms": "0", "paused": "t:0"}
    )
    assert lane.status_code == routed.status_code
    assert lane.status_code >= 400
    assert lane.json()["code"] == routed.json()["code"]


@pytest.mark.parametrize(
    "params",
    [
        {"max_bytes": "0"},
        {"max_bytes": str(64 * 1024 * 1024 + 1)},
        {"timeout_ms": "-1"},
        {"value_encoding": "bogus"},
        {"timeout_ms": "1", "other": "x"},
    ],
)
async def test_an_unusual_poll_goes_to_fastapi(proxy: Proxy, params: dict[str, str]) -> None:
    served = proxy.lane().served
    answer = await proxy.client.get(POLL.format(member="m1"), params=params)
    assert proxy.lane().served == served
    if "other" not in params:  # FastAPI's validation answers the documented 4xx
        assert answer.status_code in (400, 422), answer.text


async def test_what_the_lane_serves_is_labelled_with_the_routes_template(proxy: Proxy) -> None:
    templates = {c.path_format for c in iter_route_contexts(proxy.app.router.routes)}
    for template in (fast_lane._PRODUCE_ROUTE, fast_lane._BATCH_ROUTE, fast_lane._POLL_ROUTE):
        assert template in templates  # the lane names routes that exist
    served = proxy.lane().served
    body = {"records": [{"value": 1}]}
    for _ in range(3):
        answer = await proxy.client.post("/api/v1/topics/t/records", json=body)
        assert answer.status_code == 200
    assert proxy.lane().served == served + 3
    metrics = (await proxy.client.get("/metrics")).text
    line = next(
        line
        for line in metrics.splitlines()
        if line.startswith("yak_http_request_duration_seconds_count")
        and 'route="/api/v1/topics/{topic}/records"' in line
        and 'method="POST"' in line
    )
    assert float(line.rsplit(" ", 1)[1]) >= 3
