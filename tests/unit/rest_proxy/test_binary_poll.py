"""The binary poll at the proxy: ``whole_batches`` (whole batches reaching the offset, a batch
cut short dropped, ``max_bytes`` at batch granularity), the ``Accept`` negotiation, and the
route and the fast lane answering it alike. In process: the proxy app and a real broker app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.unit.rest_proxy.inprocess import proxy_and_broker
from tests.unit.rest_proxy.test_fast_lane import POLL, Proxy
from yak.api.fetch_answer import decode_fetch_answer
from yak.api.records import FETCH_MEDIA_TYPE
from yak.errors import CorruptRecordError, NotAcceptableError
from yak.record import RecordInput, encode_batch
from yak_rest_proxy.api.native.group_routes import wants_batches
from yak_rest_proxy.consume.reader import whole_batches
from yak_rest_proxy.settings import ProxySettings

#: Three batches: offsets 0-2, 3, 4-5.
BATCHES = [
    encode_batch([RecordInput(None, b"a"), RecordInput(None, b"b"), RecordInput(None, b"c")]),
    encode_batch([RecordInput(None, b"d")], base_offset=3),
    encode_batch([RecordInput(None, b"e"), RecordInput(None, b"f")], base_offset=4),
]
LOG = b"".join(BATCHES)
SIZES = [len(b) for b in BATCHES]


@pytest.mark.parametrize(
    ("offset", "max_bytes", "at_least_one", "kept", "next_offset"),
    [
        (0, 1 << 20, True, [0, 1, 2], 6),
        (1, 1 << 20, True, [0, 1, 2], 6),  # the first batch holds the offset: kept whole
        (3, 1 << 20, True, [1, 2], 6),  # a batch wholly below the offset: stepped over
        (5, 1 << 20, True, [2], 6),
        (6, 1 << 20, True, [], 6),  # nothing at or past the offset
        (0, 1, True, [0], 3),  # at least one batch
        (0, 1, False, [], 0),
        (0, SIZES[0] + SIZES[1], True, [0, 1], 4),
        (0, SIZES[0] + SIZES[1] - 1, True, [0], 3),
        (3, SIZES[1] + SIZES[2], True, [1, 2], 6),
    ],
)
def test_whole_batches(
    offset: int, max_bytes: int, at_least_one: bool, kept: list[int], next_offset: int
) -> None:
    view, reached = whole_batches(LOG, offset, max_bytes, at_least_one=at_least_one)
    assert bytes(view) == b"".join(BATCHES[i] for i in kept)
    assert reached == next_offset


@pytest.mark.parametrize("cut", [1, SIZES[2] - 61, SIZES[2] - 1])
def test_a_trailing_batch_cut_short_is_dropped(cut: int) -> None:
    view, reached = whole_batches(LOG[:-cut], 0, 1 << 20)
    assert bytes(view) == BATCHES[0] + BATCHES[1]
    assert reached == 4


def test_bad_framing_is_refused() -> None:
    damaged = bytearray(LOG)
    damaged[SIZES[0] + 16] = 1  # the second batch's magic
    with pytest.raises(CorruptRecordError, match="magic"):
        whole_batches(bytes(damaged), 0, 1 << 20)


@pytest.mark.parametrize(
    ("accept", "binary"),
    [
        (None, False),
        ("", False),
        ("application/json", False),
        ("*/*", False),
        (FETCH_MEDIA_TYPE, True),
        ("Application/VND.yak.fetch.v1", True),
        (f"{FETCH_MEDIA_TYPE}, application/json;q=0.5", True),
        (f"application/json, {FETCH_MEDIA_TYPE};q=0.1", True),
        (f"{FETCH_MEDIA_TYPE};q=0, application/json", False),
        ("application/vnd.yak.fetch.v2, application/json", False),
        ("text/html", False),  # never refused before the binary form: still JSON
    ],
)
def test_accept_negotiation(accept: str | None, binary: bool) -> None:
    assert wants_batches(accept) is binary


@pytest.mark.parametrize(
    "accept",
    ["application/vnd.yak.fetch.v2", f"application/vnd.yak.fetch.v9, {FETCH_MEDIA_TYPE};q=0"],
)
def test_only_other_fetch_versions_are_not_acceptable(accept: str) -> None:
    with pytest.raises(NotAcceptableError, match="application/json"):
        wants_batches(accept)


@pytest.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[Proxy]:
    async with proxy_and_broker(tmp_path, ProxySettings()) as (client, app):
        assert (await client.get("/healthz")).status_code == 200  # builds the middleware stack
        yield Proxy(client, app)


async def test_the_lane_and_the_route_answer_the_binary_poll(proxy: Proxy) -> None:
    joined = await proxy.client.post(
        "/api/v1/groups/g/members", json={"member_id": "m1", "topics": ["t"]}
    )
    assert joined.status_code == 201, joined.text
    headers = {"accept": f"{FETCH_MEDIA_TYPE}, application/json;q=0.5"}
    served = proxy.lane().served
    lane = await proxy.client.get(
        POLL.format(member="m1"), params={"timeout_ms": "0"}, headers=headers
    )
    assert proxy.lane().served == served + 1
    routed = await proxy.client.get(  # ``paused`` is not plain: FastAPI answers
        POLL.format(member="m1"), params={"timeout_ms": "0", "paused": "t:9"}, headers=headers
    )
    assert proxy.lane().served == served + 1
    for answer in (lane, routed):
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == FETCH_MEDIA_TYPE
        decoded = decode_fetch_answer(answer.content)
        assert decoded.partitions == ()  # no coordinator here: nothing assigned
    plain = await proxy.client.get(POLL.format(member="m1"), params={"timeout_ms": "0"})
    assert plain.headers["content-type"] == "application/json"


@pytest.mark.parametrize("paused", [False, True])
async def test_an_unknown_fetch_version_is_406_whoever_serves(proxy: Proxy, paused: bool) -> None:
    await proxy.client.post("/api/v1/groups/g/members", json={"member_id": "m1", "topics": ["t"]})
    params = {"timeout_ms": "0", **({"paused": "t:0"} if paused else {})}
    answer = await proxy.client.get(
        POLL.format(member="m1"), params=params, headers={"accept": "application/vnd.yak.fetch.v2"}
    )
    assert answer.status_code == 406, answer.text
    assert answer.json()["code"] == "NOT_ACCEPTABLE"
