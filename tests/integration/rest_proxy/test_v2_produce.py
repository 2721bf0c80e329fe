"""Confluent v2 metadata and produce against a real cluster, with raw HTTP.

Records produced through either proxy are read back from the brokers (the native stateless read)
at the offsets the proxy reported; keyed records land where Kafka's partitioner puts them; bad
input gets its documented status and error code and writes nothing.
"""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import V2, V2_BINARY, V2_JSON, create_topic, unique
from yak.partitioner import partition_for_key

pytestmark = pytest.mark.integration

#: Makes only its own topics and groups: the package's shared cluster (conftest.py).
SHARED_CLUSTER = True


async def read_all(proxy: httpx.AsyncClient, topic: str, partition: int) -> list[Any]:
    response = await proxy.get(
        f"/api/v1/topics/{topic}/partitions/{partition}/records",
        params={"offset": 0, "value_encoding": "base64", "key_encoding": "base64"},
    )
    assert response.status_code == 200, response.text
    records: list[Any] = response.json()["records"]
    return records


async def end_offsets(proxy: httpx.AsyncClient, topic: str, partitions: int) -> list[int]:
    ends = []
    for p in range(partitions):
        body = (await proxy.get(f"/topics/{topic}/partitions/{p}/offsets")).json()
        ends.append(body["end_offset"])
    return ends


async def test_metadata_endpoints(cluster: LocalCluster) -> None:
    topic = unique("meta")
    await create_topic(cluster, topic, partitions=2, configs={"retention.ms": "3600000"})
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0)) as proxy:
        root = await proxy.get("/", headers={"accept": V2})
        assert (root.status_code, root.json()) == (200, {})
        assert root.headers["content-type"] == V2
        assert (await proxy.get("/brokers")).json() == {"brokers": [0, 1, 2]}
        assert topic in (await proxy.get("/topics")).json()
        described = (await proxy.get(f"/topics/{topic}")).json()
        assert described["name"] == topic
        assert described["configs"]["retention.ms"] == "3600000"
        assert [p["partition"] for p in described["partitions"]] == [0, 1]
        replicas = described["partitions"][0]["replicas"]
        assert sorted(r["broker"] for r in replicas) == [0, 1, 2]
        assert sum(r["leader"] for r in replicas) == 1
        one = (await proxy.get(f"/topics/{topic}/partitions/1/")).json()  # trailing slash
        assert one == described["partitions"][1]
        offsets = (await proxy.get(f"/topics/{topic}/partitions/0/offsets")).json()
        assert offsets == {"beginning_offset": 0, "end_offset": 0}
        missing = await proxy.get("/topics/no-such-topic")
        assert (missing.status_code, missing.json()["error_code"]) == (404, 40401)
        missing = await proxy.get(f"/topics/{topic}/partitions/7")
        assert (missing.status_code, missing.json()["error_code"]) == (404, 40402)
        for hostile in ("bad%24name", "%2e%2e", "x" * 300):
            bad_name = await proxy.get(f"/topics/{hostile}")
            assert (bad_name.status_code, bad_name.json()["error_code"]) == (400, 40002)
        no_route = await proxy.get("/topics/a%2F..%2Fb")
        assert (no_route.status_code, no_route.json()["error_code"]) == (404, 404)
        refused = await proxy.get("/topics", headers={"accept": "text/html"})
        assert refused.status_code == 406


async def test_produce_json_and_binary_through_both_proxies(cluster: LocalCluster) -> None:
    topic = unique("produce")
    await create_topic(cluster, topic, partitions=4)
    keys = [f"key-{i}" for i in range(40)]
    async with (
        httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as first,
        httpx.AsyncClient(base_url=cluster.proxy_url(1), timeout=30) as second,
    ):
        # JSON embedded format through proxy 0: keyed records go by murmur2 of the key's JSON.
        json_records: list[dict[str, Any]] = [
            {"key": k, "value": {"n": i, "k": k}} for i, k in enumerate(keys)
        ]
        answer = await first.post(
            f"/topics/{topic}",
            json={"records": json_records},
            headers={"content-type": V2_JSON, "accept": V2},
        )
        assert answer.status_code == 200, answer.text
        offsets = answer.json()["offsets"]
        assert len(offsets) == len(keys)
        for record, result in zip(json_records, offsets, strict=True):
            key_bytes = f'"{record["key"]}"'.encode()
            assert result["partition"] == partition_for_key(key_bytes, 4)
            assert result["error_code"] is None
        # Binary embedded format through proxy 1, to an explicit partition.
        values = [f"binary-{i}".encode() for i in range(5)]
        answer = await second.post(
            f"/topics/{topic}/partitions/2/",
            json={"records": [{"value": base64.b64encode(v).decode()} for v in values]},
            headers={"content-type": V2_BINARY},
        )
        assert answer.status_code == 200, answer.text
        binary_offsets = [o["offset"] for o in answer.json()["offsets"]]
        assert binary_offsets == sorted(binary_offsets)
        assert {o["partition"] for o in answer.json()["offsets"]} == {2}

        # Every acknowledged record is on its partition at its offset, in order.
        stored = {p: await read_all(second, topic, p) for p in range(4)}
        for record, result in zip(json_records, offsets, strict=True):
            found = stored[result["partition"]][result["offset"]]
            assert found["offset"] == result["offset"]
            assert base64.b64decode(found["value"]) == (
                f'{{"n":{record["value"]["n"]},"k":"{record["key"]}"}}'.encode()
            )
        for value, offset in zip(values, binary_offsets, strict=True):
            assert base64.b64decode(stored[2][offset]["value"]) == value
            assert stored[2][offset]["key"] is None
        assert sum(len(r) for r in stored.values()) == len(keys) + len(values)


async def test_keyless_records_spread_and_keep_request_order(cluster: LocalCluster) -> None:
    topic = unique("keyless")
    await create_topic(cluster, topic, partitions=3)
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as proxy:
        seen: set[int] = set()
        for round_ in range(30):
            records = [{"value": f"r{round_}-{i}-" + "x" * 1000} for i in range(20)]
            answer = await proxy.post(f"/topics/{topic}", json={"records": records})
            assert answer.status_code == 200, answer.text
            by_partition: dict[int, list[int]] = {}
            for result in answer.json()["offsets"]:
                by_partition.setdefault(result["partition"], []).append(result["offset"])
            for offsets in by_partition.values():
                assert offsets == sorted(offsets)
            seen |= set(by_partition)
        assert seen == {0, 1, 2}


@pytest.mark.parametrize(
    ("content_type", "body", "status", "code"),
    [
        (V2_JSON, b'{"records": [', 400, 400),
        (V2_JSON, b'{"records": "nope"}', 422, 422),
        (V2_JSON, b'{"records": []}', 422, 422),
        (V2_JSON, b'{"records": [{"value": 1}], "value_schema": 1}', 422, 422),
        (V2_BINARY, b'{"records": [{"value": "not base64!"}]}', 422, 42205),
        (V2_BINARY, b'{"records": [{"value": "aGk="}, {"value": 5}]}', 422, 42205),
        ("application/vnd.kafka.avro.v2+json", b'{"records": [{"value": 1}]}', 415, 41501),
        ("text/plain", b"hello", 415, 41501),
        (V2_JSON, b'{"records": [{"value": 1, "partition": 9}]}', 404, 40402),
        (
            V2_JSON,
            b'{"records": [{"value": 1}, {"value": "' + b"x" * 2_000_000 + b'"}]}',
            413,
            41301,
        ),
    ],
)
async def test_bad_produce_requests_are_refused_whole(
    cluster: LocalCluster, content_type: str, body: bytes, status: int, code: int
) -> None:
    topic = unique("bad")
    await create_topic(cluster, topic, partitions=2, replication_factor=1)
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as proxy:
        answer = await proxy.post(
            f"/topics/{topic}", content=body, headers={"content-type": content_type}
        )
        assert answer.status_code == status, answer.text
        assert answer.json()["error_code"] == code
        assert isinstance(answer.json()["message"], str)
        assert answer.json()["message"]
        assert await end_offsets(proxy, topic, 2) == [0, 0]  # nothing was written


async def test_produce_to_a_missing_topic(cluster: LocalCluster) -> None:
    async with httpx.AsyncClient(base_url=cluster.proxy_url(1)) as proxy:
        answer = await proxy.post("/topics/nothing-here", json={"records": [{"value": 1}]})
        assert (answer.status_code, answer.json()["error_code"]) == (404, 40401)
        answer = await proxy.post(
            "/api/v1/topics/nothing-here/records", json={"records": [{"value": 1}]}
        )
        assert answer.status_code == 404
        assert answer.json()["code"] == "UNKNOWN_TOPIC_OR_PARTITION"
