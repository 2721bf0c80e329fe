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


V2_JSON = "application/vnd.kafka.json.v2+json"


@pytest.mark.parametrize(
    ("topic", "body", "headers", "status", "error_code"),
    [
        ("t", b'{"records": [{"value": {"n": 1}}, {"key": "k", "value": 2}]}', {}, 200, None),
        ("t", b'{"records": [{"value": "djE="}]}',
         {"content-type": "application/vnd.kafka.binary.v2+json"}, 200, None),
        ("nope", b'{"records": [{"value": 1}]}', {}, 404, 40401),
        ("t", b"{not json", {}, 400, 400),
        ("t", b'{"records": [{"value": 1, "partition": 9}]}', {}, 404, 40402),
        ("t", b'{"records": [{"value": 1}]}',
         {"content-type": "application/vnd.kafka.avro.v2+json"}, 415, 41501),
        ("t", b'{"records": [{"value": 1}]}', {"accept": "application/xml"}, 406, 40601),
    ],
)  # fmt: skip
async def test_the_plain_v2_produce_takes_the_lane_and_answers_as_the_route(
    proxy: Proxy,
    topic: str,
    body: bytes,
    headers: dict[str, str],
    status: int,
    error_code: int | None,
) -> None:
    sent = {"content-type": V2_JSON, **headers}
    lane = await proxy.client.post(f"/topics/{topic}", content=body, headers=sent)
    assert proxy.lane().served == 1
    # A query parameter the route ignores: FastAPI serves the same request.
    routed = await proxy.client.post(f"/topics/{topic}?x=1", content=body, headers=sent)
    assert proxy.lane().served == 1
    assert lane.status_code == routed.status_code == status, (lane.text, routed.text)
    assert lane.headers["content-type"] == routed.headers["content-type"]
    assert lane.headers["x-request-id"]
    if error_code is not None:
        assert lane.json()["error_code"] == routed.json()["error_code"] == error_code
        assert lane.json()["message"] == routed.json()["message"]
        return
    answer, other = lane.json(), routed.json()
    assert answer.keys() == other.keys() == {"offsets", "key_schema_id", "value_schema_id"}
    assert len(answer["offsets"]) == len(other["offsets"]) == body.count(b'"value"')
    assert answer["key_schema_id"] is answer["value_schema_id"] is None
    for mine, theirs in zip(answer["offsets"], other["offsets"], strict=True):
        assert mine.keys() == theirs.keys() == {"partition", "offset", "error_code", "error"}
        assert mine["error_code"] is theirs["error_code"] is None
        assert mine["partition"] == theirs["partition"] == 0
        assert mine["offset"] < theirs["offset"]  # the lane's records went first


async def test_a_v2_produce_with_an_idempotency_key_goes_to_fastapi(proxy: Proxy) -> None:
    body = b'{"records": [{"value": 1}]}'
    headers = {"content-type": V2_JSON, "idempotency-key": "k-1"}
    first = await proxy.client.post("/topics/t", content=body, headers=headers)
    again = await proxy.client.post("/topics/t", content=body, headers=headers)
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()  # the retry got the first answer
    bad = await proxy.client.post(
        "/topics/t", content=body, headers={**headers, "idempotency-key": "x" * 300}
    )
    assert bad.status_code == 422
    assert proxy.lane().served == 0
