"""The share-group record routes in process: the proxy app over scripted share leaders
(``consume/share/share_fakes``). Acquire renders the acquired records with their delivery
counts and a generated member id; acknowledgements answer per entry, 409
``INVALID_RECORD_STATE`` when every entry names records the member does not hold; an unknown
group is 404 and a bad filter 400 with its position, before any broker call. (The SSE and
WebSocket streams: tests/integration/rest_proxy/test_share_groups.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.unit.rest_proxy.consume.share.share_fakes import ShareBrokers, share_cluster
from yak_rest_proxy.app import create_app
from yak_rest_proxy.settings import ProxySettings

SHARE = "/api/v1/share-groups/g"
Proxy = tuple[httpx.AsyncClient, ShareBrokers]


@pytest.fixture
async def proxy() -> AsyncIterator[Proxy]:
    brokers = ShareBrokers()
    async with share_cluster() as (store, _):
        app = create_app(
            ProxySettings(cluster_id="unit"), store=store, broker_client_factory=brokers.client
        )
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://proxy"
            ) as client,
        ):
            await app.state.runtime.cache.wait_for(lambda s: "g" in s.share_groups, 5)
            yield client, brokers
        await brokers.aclose()


async def _acquire(client: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await client.post(f"{SHARE}/acquire", json={"topics": ["t"], **body})


async def test_acquire_renders_records_with_delivery_counts(proxy: Proxy) -> None:
    client, brokers = proxy
    brokers.state[(1, 0)] = ("other", 1, False)
    answer = await _acquire(client, max_records=10, value_encoding="string", timeout_ms=0)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["member_id"].startswith("share-")
    assert body["lock_timeout_ms"] == 30_000
    assert body["errors"] == []
    got = sorted(
        (r["partition"], r["offset"], r["value"], r["delivery_count"]) for r in body["records"]
    )
    assert got == [
        (0, 0, "p0-0", 1),
        (0, 1, "p0-1", 1),
        (0, 2, "p0-2", 1),
        (1, 1, "p1-1", 1),
        (1, 2, "p1-2", 1),
    ]
    assert set(body["records"][0]) == {
        "topic", "partition", "offset", "timestamp", "key", "value", "headers", "delivery_count"
    }  # fmt: skip
    assert brokers.held(body["member_id"]) == [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2)]


async def test_acknowledgements_answer_per_entry(proxy: Proxy) -> None:
    client, brokers = proxy
    await _acquire(client, member_id="m1", timeout_ms=0)
    answer = await client.post(
        f"{SHARE}/acknowledgements",
        json={
            "member_id": "m1",
            "acknowledgements": [
                {
                    "topic": "t",
                    "partition": 0,
                    "first_offset": 0,
                    "last_offset": 2,
                    "type": "accept",
                },
                {"topic": "t", "partition": 1, "offset": 9, "type": "reject"},
            ],
        },
    )
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["error"] and r["error"]["code"] for r in results] == [None, "INVALID_RECORD_STATE"]
    assert (results[0]["first_offset"], results[0]["last_offset"]) == (0, 2)
    assert brokers.held("m1") == [(1, 0), (1, 1), (1, 2)]


async def test_an_acquire_carries_acknowledgements_and_answers_their_results(
    proxy: Proxy,
) -> None:
    client, brokers = proxy
    await _acquire(client, member_id="m1", timeout_ms=0)
    brokers.add(0, b"fresh")
    answer = await _acquire(
        client,
        member_id="m1",
        timeout_ms=0,
        acknowledgements=[
            {"topic": "t", "partition": 0, "first_offset": 0, "last_offset": 2, "type": "accept"},
            {"topic": "t", "partition": 1, "offset": 9, "type": "reject"},
        ],
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    results = body["acknowledgement_results"]
    assert [r["error"] and r["error"]["code"] for r in results] == [None, "INVALID_RECORD_STATE"]
    assert (results[0]["first_offset"], results[0]["last_offset"], results[0]["type"]) == (
        0,
        2,
        "accept",
    )
    assert [(r["partition"], r["offset"]) for r in body["records"]] == [(0, 3)]
    assert brokers.held("m1") == [(0, 3), (1, 0), (1, 1), (1, 2)]


async def test_acknowledgements_in_an_acquire_need_its_member_id(proxy: Proxy) -> None:
    client, brokers = proxy
    entry = {"topic": "t", "partition": 0, "offset": 0, "type": "accept"}
    answer = await _acquire(client, timeout_ms=0, acknowledgements=[entry])
    assert answer.status_code == 400
    assert answer.json()["code"] == "INVALID_REQUEST"
    assert brokers.requests == []
    assert "member_id" in answer.json()["message"]


async def test_an_acknowledgement_of_records_not_held_is_409_and_changes_nothing(
    proxy: Proxy,
) -> None:
    client, brokers = proxy
    await _acquire(client, member_id="m1", timeout_ms=0)
    before = dict(brokers.state)
    answer = await client.post(
        f"{SHARE}/acknowledgements",
        json={
            "member_id": "m2",
            "acknowledgements": [{"topic": "t", "partition": 0, "offset": 0, "type": "accept"}],
        },
    )
    assert answer.status_code == 409, answer.text
    body = answer.json()
    assert body["code"] == "INVALID_RECORD_STATE"
    assert body["details"]["results"][0]["error"]["code"] == "INVALID_RECORD_STATE"
    assert brokers.state == before


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("acquire", {"topics": ["t"], "timeout_ms": 0}),
        (
            "acknowledgements",
            {
                "member_id": "m1",
                "acknowledgements": [{"topic": "t", "partition": 0, "offset": 0, "type": "accept"}],
            },
        ),
    ],
)
async def test_an_unknown_share_group_is_404_before_any_broker_call(
    proxy: Proxy, path: str, body: dict[str, Any]
) -> None:
    client, brokers = proxy
    answer = await client.post(f"/api/v1/share-groups/nope/{path}", json=body)
    assert answer.status_code == 404, answer.text
    assert answer.json()["code"] == "GROUP_ID_NOT_FOUND"
    assert brokers.requests == []


async def test_a_malformed_filter_is_400_with_its_position(proxy: Proxy) -> None:
    client, brokers = proxy
    answer = await _acquire(client, filter='key == "a" and', timeout_ms=0)
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["code"] == "INVALID_FILTER"
    assert body["details"]["position"] == 14
    assert brokers.requests == []


async def test_malformed_acknowledgements_are_refused(proxy: Proxy) -> None:
    client, _ = proxy
    answer = await client.post(
        f"{SHARE}/acknowledgements",
        json={
            "member_id": "m1",
            "acknowledgements": [{"topic": "t", "partition": 0, "type": "accept"}],
        },
    )
    assert answer.status_code == 400, answer.text
    assert "give offset, or first_offset and last_offset" in answer.json()["message"]
