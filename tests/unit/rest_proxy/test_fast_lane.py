"""The fast lane serves the plain native produce itself and passes everything else to FastAPI:
both answer the same. In process: the proxy app and a real broker app on an in-memory store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from tests.unit.rest_proxy.inprocess import proxy_and_broker
from yak_rest_proxy.native.fast_lane import FastLane
from yak_rest_proxy.settings import ProxySettings


@dataclass
class Proxy:
    client: httpx.AsyncClient
    app: FastAPI

    def lane(self) -> FastLane:
        node = self.app.middleware_stack  # each middleware keeps the next as app or _app
        while node is not None and not isinstance(node, FastLane):
            node = getattr(node, "app", None) or getattr(node, "_app", None)
        assert isinstance(node, FastLane)
        return node


@pytest.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[Proxy]:
    async with proxy_and_broker(tmp_path, ProxySettings()) as (client, app):
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
