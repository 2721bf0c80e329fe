"""The direct lane: the proxy app under a real uvicorn server with its direct route, as ``main``
serves it. The fast lane's requests are answered on the connection without the ASGI front —
and answer as the front answers them: the request id, the route's metrics, typed errors, the
body-read timeout; the rest (not plain, or RateLimit headers owed) goes the ASGI way."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn

from tests.unit.rest_proxy.inprocess import proxy_and_broker
from yak.web.direct import DirectRoutesProtocol, with_direct_routes
from yak.web.header_timeout import with_header_timeout
from yak_rest_proxy.api.native.direct_lane import DirectLane
from yak_rest_proxy.api.native.fast_lane import FastLane
from yak_rest_proxy.app import ProxyApp, create_app
from yak_rest_proxy.settings import ProxySettings

PRODUCE = "/api/v1/topics/{topic}/records"
POLL = "/api/v1/groups/g/members/{member}/records"


@dataclass
class Served:
    """The proxy over real HTTP (``http``), the in-process ASGI client (``asgi``), the app."""

    http: httpx.AsyncClient
    asgi: httpx.AsyncClient
    app: ProxyApp
    port: int

    @property
    def direct(self) -> DirectLane:
        assert self.app.direct_lane is not None
        return self.app.direct_lane

    def lane(self) -> FastLane:
        node = self.app.front  # each layer keeps the next as app or _app
        while node is not None and not isinstance(node, FastLane):
            node = getattr(node, "app", None) or getattr(node, "_app", None)
        assert isinstance(node, FastLane)
        return node

    async def route_count(self, template: str, method: str) -> float:
        metrics = (await self.asgi.get("/metrics")).text
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith("yak_http_request_duration_seconds_count")
            and f'route="{template}"' in line
            and f'method="{method}"' in line
        )


@asynccontextmanager
async def _served(folder: Path, settings: ProxySettings) -> AsyncIterator[Served]:
    async with proxy_and_broker(folder, settings) as (asgi, app):
        assert isinstance(app, ProxyApp)
        assert app.direct_route is not None
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        protocol = with_direct_routes(
            with_header_timeout(DirectRoutesProtocol, 5.0), app.direct_route
        )
        config = uvicorn.Config(app, log_level="warning", lifespan="off", http=protocol)
        server = uvicorn.Server(config)
        serving = asyncio.create_task(server.serve(sockets=[listener]))
        port = listener.getsockname()[1]
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
                yield Served(http, asgi, app, port)
        finally:
            server.should_exit = True
            await serving
            listener.close()


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with _served(tmp_path, ProxySettings(request_read_timeout_ms=300)) as proxy:
        assert (await proxy.asgi.get("/healthz")).status_code == 200
        yield proxy


async def test_a_plain_produce_is_answered_directly_with_the_fronts_effects(
    served: Served,
) -> None:
    before = await served.route_count(PRODUCE, "POST")
    body = {"records": [{"value": {"n": 1}}, {"key": "k", "value": "v"}]}
    for params in ({}, {"acks": "1"}, {"acks": "all"}, {"acks": "0"}):
        answer = await served.http.post(PRODUCE.format(topic="t"), params=params, json=body)
        assert answer.status_code == 200, answer.text
        assert [r["error"] for r in answer.json()["results"]] == [None, None]
        assert answer.headers["content-type"] == "application/json"
        assert len(answer.headers["x-request-id"]) >= 16  # one was made
        assert answer.headers["server"] == "uvicorn"  # uvicorn's default headers
        assert "date" in answer.headers
    given = await served.http.post(
        PRODUCE.format(topic="t"), json=body, headers={"x-request-id": "client-id-0001"}
    )
    assert given.headers["x-request-id"] == "client-id-0001"
    assert served.direct.served == 5
    assert served.lane().served == 0  # none went through the ASGI front's lane
    assert await served.route_count(PRODUCE, "POST") == before + 5
    read = await served.http.get("/api/v1/topics/t/partitions/0/records", params={"offset": 0})
    assert [r["value"] for r in read.json()["records"]][:2] == [{"n": 1}, "v"]
    assert served.direct.served == 5  # a read by offset is not the lane's


@pytest.mark.parametrize(
    ("topic", "body", "status", "code"),
    [
        ("nope", b'{"records": [{"value": 1}]}', 404, "UNKNOWN_TOPIC_OR_PARTITION"),
        ("t", b"{not json", 400, "INVALID_REQUEST"),
        ("t", b'{"records": []}', 400, "INVALID_REQUEST"),
    ],
)
async def test_typed_errors_answer_as_through_the_front(
    served: Served, topic: str, body: bytes, status: int, code: str
) -> None:
    headers = {"content-type": "application/json"}
    direct = await served.http.post(PRODUCE.format(topic=topic), content=body, headers=headers)
    front = await served.asgi.post(PRODUCE.format(topic=topic), content=body, headers=headers)
    assert served.direct.served == 1
    assert served.lane().served == 1
    assert direct.status_code == front.status_code == status
    assert direct.json()["code"] == front.json()["code"] == code
    assert direct.json()["message"] == front.json()["message"]
    assert "x-request-id" in direct.headers


async def test_a_request_that_is_not_plain_goes_the_asgi_way(served: Served) -> None:
    body = {"records": [{"value": 1}]}
    bad = await served.http.post(PRODUCE.format(topic="t"), params={"acks": "2"}, json=body)
    extra = await served.http.post(
        PRODUCE.format(topic="t"), params={"acks": "1", "x": "y"}, json=body
    )
    assert bad.status_code == 400
    assert bad.json()["code"] == "INVALID_REQUEST"
    assert extra.status_code == 200
    assert served.direct.served == 0
    assert "x-request-id" in bad.headers  # the front's middleware answered these


async def test_a_plain_poll_is_answered_directly(served: Served) -> None:
    joined = await served.http.post(
        "/api/v1/groups/g/members", json={"member_id": "m1", "topics": ["t"]}
    )
    assert joined.status_code == 201, joined.text
    started = asyncio.get_running_loop().time()
    direct = await served.http.get(POLL.format(member="m1"), params={"timeout_ms": "300"})
    waited = asyncio.get_running_loop().time() - started
    front = await served.asgi.get(POLL.format(member="m1"), params={"timeout_ms": "0"})
    assert served.direct.served == 1
    assert served.lane().served == 1
    assert direct.status_code == front.status_code == 200, (direct.text, front.text)
    assert direct.json() == front.json()  # no coordinator here: nothing assigned
    assert direct.json().keys() == {"member_epoch", "assignment", "records"}
    assert direct.headers["content-type"] == front.headers["content-type"]
    assert waited >= 0.25  # a long poll: it waited for records until its timeout
    unknown = await served.http.get(POLL.format(member="ghost"), params={"timeout_ms": "0"})
    assert unknown.status_code >= 400
    assert unknown.json()["code"]
    assert served.direct.served == 2


async def test_a_stalled_body_is_the_routes_408(served: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(
        b"POST /api/v1/topics/t/records HTTP/1.1\r\nhost: x\r\n"
        b"content-type: application/json\r\ncontent-length: 100\r\n\r\n" + b'{"records": ['
    )  # 13 of the 100 bytes, then nothing
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    writer.close()
    assert head.startswith(b"HTTP/1.1 408 "), head
    assert served.direct.served == 1


async def test_with_a_quota_the_ratelimit_headers_take_the_asgi_way(tmp_path: Path) -> None:
    settings = ProxySettings(quota_produce_bytes_per_s=1_000_000)
    async with _served(tmp_path, settings) as served:
        answer = await served.http.post(PRODUCE.format(topic="t"), json={"records": [{"value": 1}]})
        assert answer.status_code == 200, answer.text
        assert answer.headers["ratelimit-limit"] == "1000000"
        assert served.direct.served == 0
        assert served.lane().served == 1


def test_no_direct_lane_when_cors_is_configured() -> None:
    app = create_app(ProxySettings(cors_origins=("https://console.example",)))
    assert app.direct_lane is None
    assert app.direct_route is None


async def test_the_plain_v2_produce_is_answered_directly_in_its_dialect(served: Served) -> None:
    headers = {"content-type": "application/vnd.kafka.json.v2+json"}
    before = await served.route_count("/topics/{topic}", "POST")
    answer = await served.http.post(
        "/topics/t", content=b'{"records": [{"value": {"n": 1}}]}', headers=headers
    )
    unknown = await served.http.post(
        "/topics/nope", content=b'{"records": [{"value": 1}]}', headers=headers
    )
    assert served.direct.served == 2
    assert served.lane().served == 0
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/vnd.kafka.v2+json"
    [offset] = answer.json()["offsets"]
    assert offset["partition"] == 0
    assert offset["error_code"] is None
    assert unknown.status_code == 404
    assert unknown.json()["error_code"] == 40401
    assert await served.route_count("/topics/{topic}", "POST") == before + 2
