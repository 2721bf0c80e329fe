"""Confluent v2 consumer instances against a real cluster, with raw HTTP.

The instance lives in etcd: every test sends its requests alternately to two proxies. Covered:
the whole manual-assignment flow (create, assign, poll, commit, committed offsets, seeks,
delete), the documented errors, and an idle instance expiring.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator
from itertools import cycle
from typing import Any

import httpx
import pytest

from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import V2, V2_BINARY, V2_JSON, create_topic, unique

pytestmark = pytest.mark.integration

#: Makes only its own topics and groups: the package's shared cluster (conftest.py).
SHARED_CLUSTER = True


class Alternating:
    """Sends each request to the next proxy in turn."""

    def __init__(self, clients: list[httpx.AsyncClient]) -> None:
        self._next = cycle(clients)

    async def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        return await next(self._next).request(method, url, **kwargs)


@pytest.fixture
async def proxies(cluster: LocalCluster) -> AsyncIterator[Alternating]:
    async with (
        httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as first,
        httpx.AsyncClient(base_url=cluster.proxy_url(1), timeout=30) as second,
    ):
        yield Alternating([first, second])


async def produce(http: Alternating, topic: str, partition: int, values: list[Any]) -> list[int]:
    answer = await http.request(
        "POST",
        f"/topics/{topic}/partitions/{partition}",
        json={"records": [{"value": v} for v in values]},
        headers={"content-type": V2_JSON},
    )
    assert answer.status_code == 200, answer.text
    return [o["offset"] for o in answer.json()["offsets"]]


async def poll_until(http: Alternating, uri: str, count: int, accept: str) -> list[Any]:
    records: list[Any] = []
    deadline = time.monotonic() + 20
    while len(records) < count:
        assert time.monotonic() < deadline, f"only {len(records)} of {count} records"
        answer = await http.request(
            "GET", f"{uri}/records", params={"timeout": 2000}, headers={"accept": accept}
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == accept
        records += answer.json()
    return records


def instance_path(group: str, name: str) -> str:
    return f"/consumers/{group}/instances/{name}"


async def test_manual_assignment_flow_across_proxies(
    proxies: Alternating, cluster: LocalCluster
) -> None:
    topic, group = unique("flow"), unique("g")
    await create_topic(cluster, topic, partitions=2)
    created = await proxies.request(
        "POST",
        f"/consumers/{group}",
        json={
            "name": "c1",
            "format": "json",
            "auto.offset.reset": "earliest",
            "auto.commit.enable": "false",
        },
        headers={"content-type": V2},
    )
    assert created.status_code == 200, created.text
    assert created.json()["instance_id"] == "c1"
    assert created.json()["base_uri"].endswith(instance_path(group, "c1"))
    uri = instance_path(group, "c1")

    assigned = await proxies.request(
        "POST", f"{uri}/assignments", json={"partitions": [{"topic": topic, "partition": 1}]}
    )
    assert assigned.status_code == 204, assigned.text
    listed = (await proxies.request("GET", f"{uri}/assignments")).json()
    assert listed == {"partitions": [{"topic": topic, "partition": 1}]}

    await produce(proxies, topic, 0, [{"skip": i} for i in range(3)])
    offsets = await produce(proxies, topic, 1, [{"n": i} for i in range(10)])
    records = await poll_until(proxies, uri, 10, V2_JSON)
    assert [r["value"] for r in records] == [{"n": i} for i in range(10)]
    assert [r["offset"] for r in records] == offsets
    assert {(r["topic"], r["partition"]) for r in records} == {(topic, 1)}

    # Commit the 5th record as processed: Confluent stores offset + 1.
    commit = await proxies.request(
        "POST", f"{uri}/offsets", json={"offsets": [{"topic": topic, "partition": 1, "offset": 4}]}
    )
    assert (commit.status_code, commit.json()) == (200, [])
    committed = await proxies.request(
        "GET", f"{uri}/offsets", json={"partitions": [{"topic": topic, "partition": 1}]}
    )
    assert committed.json()["offsets"][0]["offset"] == 5

    # An empty commit commits every consumed position.
    assert (await proxies.request("POST", f"{uri}/offsets")).status_code == 200
    committed = await proxies.request(
        "GET", f"{uri}/offsets", json={"partitions": [{"topic": topic, "partition": 1}]}
    )
    assert committed.json()["offsets"][0]["offset"] == 10

    # Seek back to the beginning, then to an explicit offset.
    rewind = await proxies.request(
        "POST",
        f"{uri}/positions/beginning",
        json={"partitions": [{"topic": topic, "partition": 1}]},
    )
    assert rewind.status_code == 204, rewind.text
    assert len(await poll_until(proxies, uri, 10, V2_JSON)) == 10
    seek = await proxies.request(
        "POST",
        f"{uri}/positions",
        json={"offsets": [{"topic": topic, "partition": 1, "offset": 8}]},
    )
    assert seek.status_code == 204, seek.text
    again = await poll_until(proxies, uri, 2, V2_JSON)
    assert [r["offset"] for r in again] == [8, 9]

    # A binary Accept for a json instance: 40601, and the position did not move.
    wrong = await proxies.request("GET", f"{uri}/records", headers={"accept": V2_BINARY})
    assert (wrong.status_code, wrong.json()["error_code"]) == (406, 40601)

    assert (await proxies.request("DELETE", uri)).status_code == 204
    gone = await proxies.request("GET", f"{uri}/assignments")
    assert (gone.status_code, gone.json()["error_code"]) == (404, 40403)


async def test_binary_consumer_starts_at_the_committed_offset(
    proxies: Alternating, cluster: LocalCluster
) -> None:
    topic, group = unique("bin"), unique("g")
    await create_topic(cluster, topic, partitions=1)
    await produce(proxies, topic, 0, [f"v{i}" for i in range(6)])
    for name in ("first", "second"):
        created = await proxies.request(
            "POST",
            f"/consumers/{group}",
            json={"name": name, "format": "binary", "auto.offset.reset": "earliest"},
        )
        assert created.status_code == 200, created.text
    first, second = instance_path(group, "first"), instance_path(group, "second")
    body = {"partitions": [{"topic": topic, "partition": 0}]}
    assert (await proxies.request("POST", f"{first}/assignments", json=body)).status_code == 204
    got = await poll_until(proxies, first, 6, V2_BINARY)
    assert [base64.b64decode(r["value"]) for r in got] == [f'"v{i}"'.encode() for i in range(6)]
    commit = {"offsets": [{"topic": topic, "partition": 0, "offset": 2}]}
    assert (await proxies.request("POST", f"{first}/offsets", json=commit)).status_code == 200
    # Another instance of the group starts where the group committed.
    assert (await proxies.request("POST", f"{second}/assignments", json=body)).status_code == 204
    got = await poll_until(proxies, second, 3, V2_BINARY)
    assert got[0]["offset"] == 3


async def test_consumer_errors(proxies: Alternating, cluster: LocalCluster) -> None:
    topic, group = unique("errs"), unique("g")
    await create_topic(cluster, topic, partitions=1, replication_factor=1)
    create = {"name": "dup", "format": "json"}
    assert (await proxies.request("POST", f"/consumers/{group}", json=create)).status_code == 200
    again = await proxies.request("POST", f"/consumers/{group}", json=create)
    assert (again.status_code, again.json()["error_code"]) == (409, 40902)
    bad = await proxies.request(
        "POST", f"/consumers/{group}", json={"name": "x", "fetch.min.bytes": -10}
    )
    assert (bad.status_code, bad.json()["error_code"]) == (400, 40001)
    bad = await proxies.request(
        "POST", f"/consumers/{group}", json={"name": "b", "fetch.min.bytes": False}
    )
    assert (bad.status_code, bad.json()["error_code"]) == (422, 422)
    bad = await proxies.request("POST", f"/consumers/{group}", json={"name": "y", "format": "avro"})
    assert (bad.status_code, bad.json()["error_code"]) == (422, 42204)
    bad = await proxies.request("POST", "/consumers/bad%24group", json={"name": "z"})
    assert (bad.status_code, bad.json()["error_code"]) == (400, 40002)
    missing = await proxies.request("GET", instance_path(group, "nobody") + "/records")
    assert (missing.status_code, missing.json()["error_code"]) == (404, 40403)

    uri = instance_path(group, "dup")
    sub = await proxies.request("POST", f"{uri}/subscription", json={"topics": [topic]})
    assert sub.status_code == 204
    assert (await proxies.request("GET", f"{uri}/subscription")).json() == {"topics": [topic]}
    conflict = await proxies.request(
        "POST", f"{uri}/assignments", json={"partitions": [{"topic": topic, "partition": 0}]}
    )
    assert (conflict.status_code, conflict.json()["error_code"]) == (409, 40903)
    both = await proxies.request(
        "POST", f"{uri}/subscription", json={"topics": [topic], "topic_pattern": "x.*"}
    )
    assert (both.status_code, both.json()["error_code"]) == (409, 40903)
    assert (await proxies.request("DELETE", f"{uri}/subscription")).status_code == 204
    unassigned = await proxies.request(
        "POST",
        f"{uri}/positions",
        json={"offsets": [{"topic": topic, "partition": 0, "offset": 0}]},
    )
    assert (unassigned.status_code, unassigned.json()["error_code"]) == (409, 40903)
    negative = await proxies.request(
        "POST",
        f"{uri}/positions",
        json={"offsets": [{"topic": topic, "partition": 0, "offset": -1}]},
    )
    assert (negative.status_code, negative.json()["error_code"]) == (422, 42205)
    huge = await proxies.request(
        "POST",
        f"{uri}/positions",
        json={"offsets": [{"topic": topic, "partition": 0, "offset": 2**64}]},
    )
    assert (huge.status_code, huge.json()["error_code"]) == (422, 422)  # beyond int64: refused
    malformed = await proxies.request(
        "POST", f"{uri}/subscription", content=b"{", headers={"content-type": V2}
    )
    assert (malformed.status_code, malformed.json()["error_code"]) == (400, 400)
    wrong_type = await proxies.request(
        "POST", f"{uri}/subscription", content=b"topics", headers={"content-type": "text/plain"}
    )
    assert (wrong_type.status_code, wrong_type.json()["error_code"]) == (415, 41501)


async def test_idle_instance_expires(proxies: Alternating) -> None:
    group = unique("g")
    created = await proxies.request(
        "POST", f"/consumers/{group}", json={"name": "idle", "consumer.instance.timeout.ms": 1000}
    )
    assert created.status_code == 200, created.text
    uri = instance_path(group, "idle")
    assert (await proxies.request("GET", f"{uri}/subscription")).status_code == 200
    await asyncio.sleep(3.5)  # the lease's TTL passing is the behaviour under test
    gone = await proxies.request("GET", f"{uri}/subscription")
    assert (gone.status_code, gone.json()["error_code"]) == (404, 40403)


async def test_commits_beyond_one_etcd_transaction(
    proxies: Alternating, cluster: LocalCluster
) -> None:
    """etcd takes at most 128 operations per transaction: 150 partitions' offsets still commit."""
    topic, group = unique("wide"), unique("g")
    partitions = 150
    await create_topic(cluster, topic, partitions=partitions, replication_factor=1)
    records = [{"value": p, "partition": p} for p in range(partitions)]
    produced = await proxies.request("POST", f"/topics/{topic}", json={"records": records})
    assert produced.status_code == 200, produced.text
    created = await proxies.request(
        "POST",
        f"/consumers/{group}",
        json={"name": "wide", "format": "json", "auto.offset.reset": "earliest"},
    )
    assert created.status_code == 200, created.text
    uri = instance_path(group, "wide")
    every = {"partitions": [{"topic": topic, "partition": p} for p in range(partitions)]}
    assert (await proxies.request("POST", f"{uri}/assignments", json=every)).status_code == 204
    got = await poll_until(proxies, uri, partitions, V2_JSON)
    assert sorted(r["value"] for r in got) == list(range(partitions))
    assert (await proxies.request("POST", f"{uri}/offsets")).status_code == 200
    committed = await proxies.request("GET", f"{uri}/offsets", json=every)
    assert [o["offset"] for o in committed.json()["offsets"]] == [1] * partitions
    reset = await proxies.request(
        "POST",
        f"/api/v1/groups/{group}/offsets/reset",
        json={"to": "earliest", "topics": [topic, topic], "force": True},
    )
    assert reset.status_code == 200, reset.text
    assert len(reset.json()["partitions"]) == partitions
    committed = await proxies.request("GET", f"{uri}/offsets", json=every)
    assert [o["offset"] for o in committed.json()["offsets"]] == [0] * partitions
