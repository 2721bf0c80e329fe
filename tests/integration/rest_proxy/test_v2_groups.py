"""Consumer groups through the v2 API on a real cluster: the coordinator's assignment as
instances join and leave, members beyond the partition count idle, fenced commits, a proxy
killed with kill -9 in the middle of consuming, and the group admin API (lag, reset, delete)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import V2_JSON, create_topic, unique

pytestmark = pytest.mark.integration


@pytest.fixture
async def clients(cluster: LocalCluster) -> AsyncIterator[list[httpx.AsyncClient]]:
    async with (
        httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as first,
        httpx.AsyncClient(base_url=cluster.proxy_url(1), timeout=30) as second,
    ):
        yield [first, second]


async def join(http: httpx.AsyncClient, group: str, name: str, topic: str) -> str:
    created = await http.post(
        f"/consumers/{group}",
        json={
            "name": name,
            "format": "json",
            "auto.offset.reset": "earliest",
            "auto.commit.enable": "false",
        },
    )
    assert created.status_code == 200, created.text
    uri = f"/consumers/{group}/instances/{name}"
    subscribed = await http.post(f"{uri}/subscription", json={"topics": [topic]})
    assert subscribed.status_code == 204, subscribed.text
    return uri


async def assignment(http: httpx.AsyncClient, uri: str) -> set[int]:
    answer = await http.get(f"{uri}/assignments")
    assert answer.status_code == 200, answer.text
    return {p["partition"] for p in answer.json()["partitions"]}


async def settle(
    clients: list[httpx.AsyncClient], uris: list[str], want: dict[str, int], total: int
) -> dict[str, set[int]]:
    """Poll every instance (through alternating proxies: a poll is what moves partitions)
    until the assignment has the wanted sizes and covers ``total`` partitions exactly once."""
    deadline = time.monotonic() + 30
    while True:
        owned = {}
        for i, uri in enumerate(uris):
            await clients[i % 2].get(
                f"{uri}/records", params={"timeout": 0}, headers={"accept": V2_JSON}
            )
            owned[uri] = await assignment(clients[(i + 1) % 2], uri)
        sizes = {uri: len(parts) for uri, parts in owned.items()}
        union = [p for parts in owned.values() for p in parts]
        if sizes == want and sorted(union) == list(range(total)):
            return owned
        assert time.monotonic() < deadline, f"assignment did not settle: {owned}"
        await asyncio.sleep(0.1)  # the coordinator is another process


async def produce(http: httpx.AsyncClient, topic: str, count: int, start: int = 0) -> None:
    records = [{"key": f"k{i}", "value": i} for i in range(start, start + count)]
    answer = await http.post(f"/topics/{topic}", json={"records": records})
    assert answer.status_code == 200, answer.text


async def drain(http: httpx.AsyncClient, uri: str, idle_polls: int = 2) -> list[Any]:
    got: list[Any] = []
    idle = 0
    while idle < idle_polls:
        answer = await http.get(
            f"{uri}/records", params={"timeout": 500}, headers={"accept": V2_JSON}
        )
        assert answer.status_code == 200, answer.text
        records = answer.json()
        idle = 0 if records else idle + 1
        got += records
    return got


async def test_rebalance_as_instances_join_and_leave(
    clients: list[httpx.AsyncClient], cluster: LocalCluster
) -> None:
    topic, group = unique("rebal"), unique("g")
    await create_topic(cluster, topic, partitions=6)
    uris = [await join(clients[i % 2], group, f"m{i}", topic) for i in range(3)]
    owned = await settle(clients, uris, dict.fromkeys(uris, 2), 6)
    await produce(clients[0], topic, 300)
    values: list[int] = []
    for i, uri in enumerate(uris):
        records = await drain(clients[i % 2], uri)
        assert {r["partition"] for r in records} <= owned[uri]
        values += [r["value"] for r in records]
    assert sorted(values) == list(range(300))  # every record once, across the group

    # One leaves: the other two take its partitions.
    assert (await clients[0].delete(uris[2])).status_code == 204
    await settle(clients, uris[:2], {uris[0]: 3, uris[1]: 3}, 6)
    # Five join: seven members on six partitions, one partition each and one member idle.
    members = uris[:2] + [await join(clients[i % 2], group, f"m{i}", topic) for i in range(3, 8)]
    deadline = time.monotonic() + 30
    while True:
        sizes = []
        for i, uri in enumerate(members):
            poll = {"timeout": 0}
            await clients[i % 2].get(f"{uri}/records", params=poll, headers={"accept": V2_JSON})
            sizes.append(len(await assignment(clients[i % 2], uri)))
        if sorted(sizes) == [0, 1, 1, 1, 1, 1, 1]:
            break
        assert time.monotonic() < deadline, f"sizes {sizes}"
        await asyncio.sleep(0.1)  # the coordinator is another process


async def test_commit_of_a_partition_owned_by_another_member_is_fenced(
    clients: list[httpx.AsyncClient], cluster: LocalCluster
) -> None:
    topic, group = unique("fence"), unique("g")
    await create_topic(cluster, topic, partitions=2)
    uris = [await join(clients[i], group, f"m{i}", topic) for i in range(2)]
    owned = await settle(clients, uris, dict.fromkeys(uris, 1), 2)
    (foreign,) = owned[uris[1]]
    fenced = await clients[0].post(
        f"{uris[0]}/offsets",
        json={"offsets": [{"topic": topic, "partition": foreign, "offset": 0}]},
    )
    assert (fenced.status_code, fenced.json()["error_code"]) == (409, 40903)
    (own,) = owned[uris[0]]
    ok = await clients[1].post(
        f"{uris[0]}/offsets", json={"offsets": [{"topic": topic, "partition": own, "offset": 0}]}
    )
    assert ok.status_code == 200, ok.text


async def test_proxy_killed_mid_consume(
    clients: list[httpx.AsyncClient], cluster: LocalCluster
) -> None:
    topic, group = unique("kill"), unique("g")
    await create_topic(cluster, topic, partitions=3)
    uri = await join(clients[0], group, "survivor", topic)
    await settle(clients, [uri], {uri: 3}, 3)  # (its polls read records: produce after it)
    await produce(clients[1], topic, 200)
    first = await clients[0].get(
        f"{uri}/records", params={"timeout": 2000, "max_bytes": 200}, headers={"accept": V2_JSON}
    )
    seen = first.json()
    assert seen
    committed: dict[int, int] = {}
    for record in seen:
        committed[record["partition"]] = max(
            committed.get(record["partition"], -1), record["offset"]
        )
    commit = [{"topic": topic, "partition": p, "offset": o} for p, o in committed.items()]
    assert (await clients[0].post(f"{uri}/offsets", json={"offsets": commit})).status_code == 200

    cluster.kill_proxy(0)
    try:
        rest = await drain(clients[1], uri)
    finally:
        cluster.start_proxy(0, YAK_CONSUMER_INSTANCE_TIMEOUT_MS="5000")
    values = sorted(r["value"] for r in [*seen, *rest])
    assert values == list(range(200))  # positions lived in etcd: nothing lost, nothing twice


async def test_group_admin_lag_reset_and_delete(
    clients: list[httpx.AsyncClient], cluster: LocalCluster
) -> None:
    topic, group = unique("lag"), unique("g")
    await create_topic(cluster, topic, partitions=2)
    uri = await join(clients[0], group, "only", topic)
    await settle(clients, [uri], {uri: 2}, 2)
    await produce(clients[0], topic, 40)
    described = (await clients[1].get(f"/api/v1/groups/{group}")).json()
    assert described["state"] in ("Stable", "CompletingRebalance")
    assert [m["member_id"] for m in described["members"]] == ["only"]

    records = await drain(clients[0], uri)
    assert len(records) == 40
    assert (await clients[0].post(f"{uri}/offsets")).status_code == 200
    described = (await clients[1].get(f"/api/v1/groups/{group}")).json()
    assert described["total_lag"] == 0
    assert {p["partition"]: p["owner"] for p in described["partitions"]} == {0: "only", 1: "only"}
    await produce(clients[0], topic, 10, start=40)
    described = (await clients[1].get(f"/api/v1/groups/{group}")).json()
    assert described["total_lag"] == 10

    refused = await clients[1].post(
        f"/api/v1/groups/{group}/offsets/reset", json={"to": "earliest"}
    )
    assert (refused.status_code, refused.json()["code"]) == (409, "NON_EMPTY_GROUP")
    assert (await clients[0].delete(uri)).status_code == 204
    preview = await clients[1].post(
        f"/api/v1/groups/{group}/offsets/reset", json={"to": "earliest", "dry_run": True}
    )
    assert preview.status_code == 200, preview.text
    assert {c["new"] for c in preview.json()["partitions"]} == {0}
    assert (await clients[1].get(f"/api/v1/groups/{group}")).json()["total_lag"] == 10
    reset = await clients[1].post(f"/api/v1/groups/{group}/offsets/reset", json={"to": "earliest"})
    assert reset.status_code == 200, reset.text
    assert (await clients[1].get(f"/api/v1/groups/{group}")).json()["total_lag"] == 50
    assert (await clients[1].delete(f"/api/v1/groups/{group}")).status_code == 204
    gone = await clients[1].get(f"/api/v1/groups/{group}")
    assert (gone.status_code, gone.json()["code"]) == (404, "GROUP_ID_NOT_FOUND")
