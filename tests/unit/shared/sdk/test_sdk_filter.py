"""``filter`` in the SDK: the consumer and the partition reader send it with every read and
never filter themselves; a filtered consumer asks for JSON, and its ``commit()`` commits the
proxy's positions (past the records the filter dropped) once every polled record was handed
out, else the records handed out."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from tests.unit.shared.sdk.fake_proxy import FakeProxy
from yak.errors import InvalidFilterError
from yak.sdk import AsyncConsumer, AsyncPartitionReader, TopicPartition

URL = "http://proxy.test"
T0 = TopicPartition("t", 0)
TEXT = 'value.kind == "a" and headers.h startswith "x"'


def wire(offset: int, value: bytes) -> dict[str, Any]:
    encoded = base64.b64encode(value).decode()
    return {"topic": "t", "partition": 0, "offset": offset, "timestamp": 1, "key": None,
            "value": encoded, "headers": []}  # fmt: skip


def consumer(proxy: FakeProxy, **options: Any) -> AsyncConsumer:
    return AsyncConsumer(URL, "g", ["t"], transport=proxy.transport(), filter=TEXT, **options)


def polls(proxy: FakeProxy) -> list[httpx.Request]:
    return [r for r in proxy.requests if r.url.path.endswith("/records")]


async def test_the_consumer_sends_its_filter_and_asks_for_json() -> None:
    proxy = FakeProxy(assignment=[("t", 0)], binary=True)
    proxy.to_poll.append([wire(7, b"x")])
    async with consumer(proxy) as c:
        assert [r.value for r in await c.poll(0)] == [b"x"]  # handed out as the proxy sent it
    (poll,) = polls(proxy)
    assert poll.url.params["filter"] == TEXT
    assert poll.headers["accept"] == "application/json"


async def test_a_drained_filtered_poll_commits_the_proxys_positions() -> None:
    proxy = FakeProxy(assignment=[("t", 0)])
    proxy.to_poll.append([wire(3, b"a")])
    async with consumer(proxy) as c:
        await c.poll(0)
        await c.commit()
        await c.commit({T0: 2})  # explicit offsets are sent as they are
    assert [commit.get("offsets") for commit in proxy.commits] == [
        None,
        [{"topic": "t", "partition": 0, "offset": 2}],
    ]


async def test_mid_iteration_a_filtered_commit_covers_what_was_handed_out() -> None:
    proxy = FakeProxy(assignment=[("t", 0)])
    proxy.to_poll.append([wire(0, b"a"), wire(5, b"b")])
    async with consumer(proxy) as c:
        async for record in c:
            await c.commit()
            if record.offset == 5:
                break
    assert [commit.get("offsets") for commit in proxy.commits] == [
        [{"topic": "t", "partition": 0, "offset": 1}],  # "b" not handed out yet
        None,  # the last record of the poll: the proxy's position, past what was dropped
    ]


async def test_the_reader_sends_its_filter_or_the_reads() -> None:
    asked: list[httpx.QueryParams] = []

    def handle(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.params)
        if request.url.params.get("filter") == "bad":
            return httpx.Response(
                400,
                json={"code": "INVALID_FILTER", "message": "unexpected end", "details": {}},
            )
        body = {"topic": "t", "partition": 0, "records": [], "next_offset": 40,
                "high_watermark": 40, "log_start_offset": 0}  # fmt: skip
        return httpx.Response(200, json=body)

    transport = httpx.MockTransport(handle)
    async with AsyncPartitionReader(URL, transport=transport, filter=TEXT) as reader:
        read = await reader.read("t", 0, 10)
        assert (read.records, read.next_offset) == ([], 40)  # nothing matched, still moved
        await reader.read("t", 0, 40, filter="key == 1")
        with pytest.raises(InvalidFilterError):
            await reader.read("t", 0, 40, filter="bad")
    assert [params.get("filter") for params in asked] == [TEXT, "key == 1", "bad"]
    async with AsyncPartitionReader(URL, transport=transport) as plain:
        await plain.read("t", 0, 0)
    assert "filter" not in asked[-1]
