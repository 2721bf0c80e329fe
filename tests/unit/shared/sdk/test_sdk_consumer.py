"""``AsyncConsumer`` against an in-process fake proxy: bytes out of base64 (a proxy without
the binary poll) or out of the record batches of a binary poll (records below the fetch offset
skipped, CRCs checked), the positions ``commit()`` sends, pause as a query parameter, typed
fencing, seeks and re-joining."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from tests.unit.shared.sdk.fake_proxy import FakeProxy
from yak.api.fetch_answer import FetchedBatches
from yak.api.records import FETCH_MEDIA_TYPE
from yak.errors import (
    CorruptRecordError,
    FencedMemberEpochError,
    IllegalStateError,
    UnknownServerError,
)
from yak.record import RecordInput, encode_batch
from yak.sdk import AsyncConsumer, ConsumerRecord, TopicPartition

URL = "http://proxy.test"
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def wire(partition: int, offset: int, value: bytes, key: bytes | None = None) -> dict[str, Any]:
    return {
        "topic": "t",
        "partition": partition,
        "offset": offset,
        "timestamp": 1_000 + offset,
        "key": None if key is None else b64(key),
        "value": b64(value),
        "headers": [{"key": "h", "value": b64(b"\x00\xff")}, {"key": "n", "value": None}],
    }


def consumer(proxy: FakeProxy, **options: Any) -> AsyncConsumer:
    return AsyncConsumer(URL, "g", ["t"], transport=proxy.transport(), **options)


async def test_poll_decodes_bytes_and_commit_sends_the_next_offsets() -> None:
    proxy = FakeProxy(assignment=[("t", 0), ("t", 1)])
    proxy.to_poll.append([wire(0, 4, b"\x01bin", key=b"k"), wire(1, 9, b"v")])
    async with consumer(proxy, auto_offset_reset="earliest") as c:
        assert c.member_id == "m-1"
        records = await c.poll(100)
        assert records[0] == ConsumerRecord(
            "t", 0, 4, 1_004, b"k", b"\x01bin", (("h", b"\x00\xff"), ("n", None))
        )
        assert c.assignment() == {T0, T1}
        assert c.member_epoch == 3
        assert (c.position(T0), c.position(T1)) == (5, 10)
        await c.commit()
        await c.commit({T1: 3})
    join = json.loads(proxy.requests[0].content)
    assert (join["topics"], join["auto_offset_reset"], join["auto_commit"]) == (
        ["t"],
        "earliest",
        False,
    )
    poll = next(r for r in proxy.requests if r.url.path.endswith("/records"))
    assert poll.url.params["value_encoding"] == "base64"
    assert poll.url.params["timeout_ms"] == "100"
    assert proxy.commits == [
        {
            "offsets": [
                {"topic": "t", "partition": 0, "offset": 5},
                {"topic": "t", "partition": 1, "offset": 10},
            ]
        },
        {"offsets": [{"topic": "t", "partition": 1, "offset": 3}]},
    ]
    assert proxy.requests[-1].method == "DELETE"  # left the group


async def test_a_commit_for_a_partition_not_owned_is_fenced() -> None:
    proxy = FakeProxy(assignment=[("t", 0)])
    async with consumer(proxy) as c:
        await c.poll(0)
        with pytest.raises(FencedMemberEpochError, match="not owned"):
            await c.commit({T1: 1})
        await c.commit()  # nothing consumed yet: nothing sent
    assert len(proxy.commits) == 1


async def test_paused_partitions_go_as_a_query_parameter() -> None:
    proxy = FakeProxy(assignment=[("t", 0), ("t", 1)])
    async with consumer(proxy) as c:
        await c.poll(0)
        with pytest.raises(IllegalStateError, match="not assigned"):
            c.pause(TopicPartition("t", 7))
        c.pause(T1)
        assert c.paused() == {T1}
        await c.poll(0)
        c.resume(T1)
        await c.poll(0)
    polls = [r for r in proxy.requests if r.url.path.endswith("/records")]
    assert [p.url.params.get_list("paused") for p in polls] == [[], ["t:1"], []]


async def test_seeks_and_positions() -> None:
    proxy = FakeProxy(assignment=[("t", 0), ("t", 1)])
    proxy.to_poll.append([wire(0, 0, b"a")])
    async with consumer(proxy) as c:
        await c.poll(0)
        await c.seek("t", 1, 42)
        assert c.position(T1) == 42
        await c.seek_to_beginning(T0)
        assert c.position(T0) is None  # the proxy finds the offset: nothing to commit yet
        await c.seek_to_end()
        await c.seek_to_timestamp(1_700_000_000_000, T1)
    assert proxy.seeks == [
        {"partitions": [{"topic": "t", "partition": 1, "offset": 42}]},
        {"partitions": [{"topic": "t", "partition": 0, "to": "earliest"}]},
        {
            "partitions": [
                {"topic": "t", "partition": 0, "to": "latest"},
                {"topic": "t", "partition": 1, "to": "latest"},
            ]
        },
        {"partitions": [{"topic": "t", "partition": 1, "timestamp": 1_700_000_000_000}]},
    ]


async def test_an_expired_member_joins_again_under_its_id() -> None:
    proxy = FakeProxy(assignment=[("t", 0)])
    proxy.to_poll.append([wire(0, 0, b"a")])
    async with consumer(proxy, member_id="me") as c:
        assert len(await c.poll(0)) == 1
        proxy.member_gone = True
        assert await c.poll(0) == []
        assert c.position(T0) is None  # uncommitted positions are lost
        assert (proxy.joins, c.member_id) == (2, "me")


async def test_iteration_marks_each_record_as_it_is_handed_out() -> None:
    proxy = FakeProxy(assignment=[("t", 0)])
    proxy.to_poll.append([wire(0, 0, b"a"), wire(0, 1, b"b")])
    async with consumer(proxy) as c:
        async for record in c:
            assert record.value == b"a"
            assert c.position(T0) == 1  # not 2: "b" was not handed out yet
            break
        await c.commit()
    assert proxy.commits == [{"offsets": [{"topic": "t", "partition": 0, "offset": 1}]}]


async def test_calls_before_start_and_after_close() -> None:
    proxy = FakeProxy(assignment=[("t", 0)])
    c = consumer(proxy)
    with pytest.raises(IllegalStateError, match="start"):
        await c.commit({T0: 1})
    await c.aclose()
    with pytest.raises(IllegalStateError, match="closed"):
        await c.start()
    assert proxy.requests == []


def batches(partition: int, fetch_offset: int, *runs: list[tuple[int, bytes]]) -> FetchedBatches:
    """Whole batches of (offset, value) runs, each run one batch; read from ``fetch_offset``."""
    data = b"".join(
        encode_batch(
            [RecordInput(b"k", v, (("h", b"\x00\xff"), ("n", None)), 1_000 + o) for o, v in run],
            base_offset=run[0][0],
        )
        for run in runs
    )
    return FetchedBatches("t", partition, fetch_offset, data, 99, 0)


async def test_a_binary_poll_decodes_the_batches_from_the_fetch_offset() -> None:
    proxy = FakeProxy(assignment=[("t", 0), ("t", 1)], binary=True)
    proxy.to_fetch.append(
        [
            batches(0, 5, [(4, b"below"), (5, b"five"), (6, b"six")], [(7, b"seven")]),
            batches(1, 0, [(0, b"one")]),
        ]
    )
    async with consumer(proxy, auto_offset_reset="earliest") as c:
        records = await c.poll(100)
        assert records == [
            ConsumerRecord("t", 0, o, 1_000 + o, b"k", v, (("h", b"\x00\xff"), ("n", None)))
            for o, v in [(5, b"five"), (6, b"six"), (7, b"seven")]
        ] + [ConsumerRecord("t", 1, 0, 1_000, b"k", b"one", (("h", b"\x00\xff"), ("n", None)))]
        assert (c.assignment(), c.member_epoch) == ({T0, T1}, 3)
        assert (c.position(T0), c.position(T1)) == (8, 1)
        assert await c.poll(0) == []
        await c.commit()
    poll = next(r for r in proxy.requests if r.url.path.endswith("/records"))
    assert poll.headers["accept"] == "application/vnd.yak.fetch.v1, application/json;q=0.5"
    # Base64 asked too: a proxy without the binary form answers JSON the consumer reads.
    assert poll.url.params["value_encoding"] == "base64"
    assert proxy.commits == [
        {
            "offsets": [
                {"topic": "t", "partition": 0, "offset": 8},
                {"topic": "t", "partition": 1, "offset": 1},
            ]
        }
    ]


async def test_a_corrupt_batch_is_raised_not_handed_out() -> None:
    proxy = FakeProxy(assignment=[("t", 0)], binary=True)
    damaged = bytearray(batches(0, 0, [(0, b"a"), (1, b"b")]).batches)
    damaged[-1] ^= 0xFF  # the CRC no longer matches
    proxy.to_fetch.append([FetchedBatches("t", 0, 0, bytes(damaged))])
    async with consumer(proxy) as c:
        with pytest.raises(CorruptRecordError, match="CRC"):
            await c.poll(0)
        assert c.position(T0) is None


async def test_a_malformed_binary_answer_is_an_unknown_server_error() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(
                201, json={"group_id": "g", "member_id": "m", "member_epoch": 0, "assignment": []}
            )
        if request.method == "DELETE":
            return httpx.Response(204)
        return httpx.Response(200, content=b"\x00\x00", headers={"content-type": FETCH_MEDIA_TYPE})

    async with AsyncConsumer(URL, "g", "t", transport=httpx.MockTransport(handle)) as c:
        with pytest.raises(UnknownServerError, match="malformed"):
            await c.poll(0)
