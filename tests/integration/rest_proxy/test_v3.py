"""The Confluent v3 API on a real cluster: a topic's life over v3 (create, describe, configs,
delete), one record and a stream of 1,000 read back over the native API, a stream answered
record by record while the request is still open, consumer groups with lag, and the v3 error
codes. One cluster for the module (``conftest.cluster``)."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import pytest

from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import V2_JSON, create_topic, unique

pytestmark = pytest.mark.integration

#: Makes only its own topics and groups: the package's shared cluster (conftest.py).
SHARED_CLUSTER = True


@pytest.fixture
async def proxies(cluster: LocalCluster) -> AsyncIterator[list[httpx.AsyncClient]]:
    async with (
        httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as first,
        httpx.AsyncClient(base_url=cluster.proxy_url(1), timeout=30) as second,
    ):
        yield [first, second]


async def cluster_path(http: httpx.AsyncClient) -> str:
    listed = (await http.get("/v3/clusters")).json()
    (cluster,) = listed["data"]
    return f"/v3/clusters/{cluster['cluster_id']}"


async def read_all(
    http: httpx.AsyncClient, topic: str, partitions: int, count: int
) -> dict[tuple[int, int], dict[str, Any]]:
    """Every record of ``topic`` by (partition, offset), once ``count`` are there."""
    found: dict[tuple[int, int], dict[str, Any]] = {}
    deadline = time.monotonic() + 20
    while len(found) < count:
        for p in range(partitions):
            start = max((o + 1 for q, o in found if q == p), default=0)
            answer = await http.get(
                f"/api/v1/topics/{topic}/partitions/{p}/records",
                params={"offset": start, "timeout_ms": 0, "key_encoding": "string"},
            )
            assert answer.status_code == 200, answer.text
            for record in answer.json()["records"]:
                found[(p, record["offset"])] = record
        assert time.monotonic() < deadline, f"{len(found)} of {count} records read back"
    return found


async def test_topic_life_configs_and_records(proxies: list[httpx.AsyncClient]) -> None:
    first, second = proxies
    v3 = await cluster_path(first)
    topic = unique("v3")
    created = await first.post(
        f"{v3}/topics",
        json={
            "topic_name": topic,
            "partitions_count": 3,
            "replication_factor": 2,
            "configs": [{"name": "retention.ms", "value": "600000"}],
        },
    )
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["kind"], body["topic_name"], body["partitions_count"]) == ("KafkaTopic", topic, 3)
    assert body["replication_factor"] == 2
    again = await first.post(f"{v3}/topics", json={"topic_name": topic})
    assert (again.status_code, again.json()["error_code"]) == (400, 40002)

    described = await second.get(f"{v3}/topics/{topic}")  # the other proxy sees it at once
    assert described.status_code == 200, described.text
    partitions = (await second.get(f"{v3}/topics/{topic}/partitions")).json()["data"]
    assert [p["partition_id"] for p in partitions] == [0, 1, 2]
    assert all(p["leader"] is not None for p in partitions)

    config = (await first.get(f"{v3}/topics/{topic}/configs/retention.ms")).json()
    assert (config["value"], config["source"]) == ("600000", "DYNAMIC_TOPIC_CONFIG")
    put = await first.put(f"{v3}/topics/{topic}/configs/retention.ms", json={"value": "700000"})
    assert put.status_code == 204, put.text
    alter = await first.post(
        f"{v3}/topics/{topic}/configs:alter",
        json={
            "data": [
                {"name": "retention.ms", "operation": "DELETE"},
                {"name": "cleanup.policy", "value": "compact"},
            ]
        },
    )
    assert alter.status_code == 204, alter.text
    listed = (await first.get(f"{v3}/topics/{topic}/configs")).json()["data"]
    values = {c["name"]: (c["value"], c["is_default"]) for c in listed}
    assert values["cleanup.policy"] == ("compact", False)
    assert values["retention.ms"][1] is True
    reset = await first.delete(f"{v3}/topics/{topic}/configs/cleanup.policy")
    assert reset.status_code == 204
    checked = await first.post(
        f"{v3}/topics/{topic}/configs:alter",
        json={"data": [{"name": "retention.ms", "value": "soon"}], "validate_only": True},
    )
    assert (checked.status_code, checked.json()["error_code"]) == (400, 40002)
    config = (await first.get(f"{v3}/topics/{topic}/configs/cleanup.policy")).json()
    assert (config["value"], config["is_default"]) == ("delete", True)

    one = await first.post(
        f"{v3}/topics/{topic}/records",
        json={
            "partition_id": 1,
            "headers": [{"name": "h", "value": base64.b64encode(b"hv").decode()}],
            "key": {"type": "STRING", "data": "only"},
            "value": {"type": "JSON", "data": {"n": -1}},
        },
    )
    assert one.status_code == 200, one.text
    report = one.json()
    assert (report["error_code"], report["partition_id"], report["offset"]) == (200, 1, 0)

    async def stream() -> AsyncIterator[bytes]:
        for n in range(1000):
            record = {
                "key": {"type": "STRING", "data": f"k{n}"},
                "value": {"type": "JSON", "data": {"n": n}},
            }
            yield orjson.dumps(record) + b"\n"

    answer = await second.post(f"{v3}/topics/{topic}/records", content=stream())
    assert answer.status_code == 200
    reports = [orjson.loads(line) for line in answer.text.splitlines()]
    assert len(reports) == 1000
    assert all(r["error_code"] == 200 for r in reports), [
        r for r in reports if r["error_code"] != 200
    ][:3]
    stored = await read_all(first, topic, 3, 1001)
    assert stored[(1, 0)]["value"] == {"n": -1}
    assert stored[(1, 0)]["headers"] == [{"key": "h", "value": "hv"}]
    for n, r in enumerate(reports):  # each report says where its own record is
        assert stored[(r["partition_id"], r["offset"])]["value"] == {"n": n}
        assert stored[(r["partition_id"], r["offset"])]["key"] == f"k{n}"

    deleted = await second.delete(f"{v3}/topics/{topic}")
    assert deleted.status_code == 204, deleted.text
    gone = await first.get(f"{v3}/topics/{topic}")
    assert (gone.status_code, gone.json()["error_code"]) == (404, 404)
    late = await first.post(f"{v3}/topics/{topic}/records", json={"value": None})
    assert (late.status_code, late.json()["error_code"]) == (404, 40403)


async def _chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    await writer.drain()


async def _read_chunk(reader: asyncio.StreamReader) -> bytes:
    size = int((await reader.readline()).strip(), 16)
    data = await reader.readexactly(size + 2)
    return data[:-2]


async def test_streaming_reports_come_while_the_request_is_open(cluster: LocalCluster) -> None:
    """Full duplex over one connection: each record's report is read before the next record
    is sent, so the proxy produced and answered it from an unfinished request body."""
    topic = unique("v3stream")
    await create_topic(cluster, topic, partitions=1, replication_factor=1)
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as http:
        v3 = await cluster_path(http)
    where = urlsplit(cluster.proxy_url(0))
    reader, writer = await asyncio.open_connection(where.hostname, where.port)
    try:
        writer.write(
            f"POST {v3}/topics/{topic}/records HTTP/1.1\r\nHost: {where.netloc}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        )
        reports = []
        async with asyncio.timeout(20):
            for n in range(5):
                record = {"value": {"type": "STRING", "data": f"r{n}"}}
                if n == 2:
                    record = {"value": {"type": "BINARY", "data": "not base64!"}}
                await _chunk(writer, orjson.dumps(record))
                if n == 0:
                    status = await reader.readline()
                    assert status.startswith(b"HTTP/1.1 200"), status
                    while (await reader.readline()) != b"\r\n":
                        pass  # headers
                reports.append(orjson.loads(await _read_chunk(reader)))
            await _chunk(writer, b"")  # the body's end
            assert await _read_chunk(reader) == b""  # the answer's end
    finally:
        writer.close()
    assert [r["error_code"] for r in reports] == [200, 200, 400, 200, 200]
    assert [r.get("offset") for r in reports] == [0, 1, None, 2, 3]


async def test_consumer_groups_and_lags(
    cluster: LocalCluster, proxies: list[httpx.AsyncClient]
) -> None:
    first, second = proxies
    v3 = await cluster_path(first)
    topic, group = unique("v3g"), unique("v3group")
    await create_topic(cluster, topic, partitions=2, replication_factor=1)
    records = [{"value": i, "partition": i % 2} for i in range(10)]
    assert (await first.post(f"/topics/{topic}", json={"records": records})).status_code == 200
    uri = f"/consumers/{group}/instances/c1"
    made = await first.post(
        f"/consumers/{group}",
        json={
            "name": "c1",
            "format": "json",
            "auto.offset.reset": "earliest",
            "auto.commit.enable": "false",
        },
    )
    assert made.status_code == 200, made.text
    assert (await first.post(f"{uri}/subscription", json={"topics": [topic]})).status_code == 204
    seen: list[Any] = []
    deadline = time.monotonic() + 20
    while len(seen) < 6:  # read some, not all: the group has lag
        polled = await first.get(
            f"{uri}/records", params={"max_bytes": 40}, headers={"accept": V2_JSON}
        )
        seen += polled.json()
        assert time.monotonic() < deadline
    committed = await first.post(f"{uri}/offsets")
    assert committed.status_code in (200, 204), committed.text

    listed = (await second.get(f"{v3}/consumer-groups")).json()
    mine = [g for g in listed["data"] if g["consumer_group_id"] == group]
    assert [g["kind"] for g in mine] == ["KafkaConsumerGroup"]
    one = (await second.get(f"{v3}/consumer-groups/{group}")).json()
    assert one["state"] in ("STABLE", "PREPARING_REBALANCE")
    consumers = (await second.get(f"{v3}/consumer-groups/{group}/consumers")).json()["data"]
    assert len(consumers) == 1
    member = consumers[0]["consumer_id"]
    assert (await second.get(f"{v3}/consumer-groups/{group}/consumers/{member}")).status_code == 200
    lags = (await second.get(f"{v3}/consumer-groups/{group}/lags")).json()["data"]
    assert sorted(lag["partition_id"] for lag in lags) == [0, 1]
    total = sum(lag["lag"] for lag in lags)
    assert total == 10 - len(seen)
    assert all(lag["log_end_offset"] == 5 for lag in lags)
    summary = (await second.get(f"{v3}/consumer-groups/{group}/lag-summary")).json()
    assert summary["total_lag"] == total
    assert summary["max_lag"] == max(lag["lag"] for lag in lags)
    lag = await second.get(f"{v3}/consumer-groups/{group}/lags/{topic}/partitions/0")
    assert (lag.status_code, lag.json()["topic_name"]) == (200, topic)
    missing = await second.get(f"{v3}/consumer-groups/{unique('nobody')}")
    assert (missing.status_code, missing.json()["error_code"]) == (404, 404)
    await first.delete(uri)


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("GET", "/v3/clusters/no-such-cluster", None, 404, 404),
        ("GET", "{v3}/topics/no-such-topic", None, 404, 404),
        ("POST", "{v3}/topics/no-such-topic/records", b"{}", 404, 40403),
        ("DELETE", "{v3}/topics/no-such-topic", None, 404, 40403),
        ("POST", "{v3}/topics", b'{"topic_name": ', 400, 400),
        ("POST", "{v3}/topics", b'{"partitions_count": 1}', 422, 422),
        ("POST", "{v3}/topics", b'{"topic_name": "a/b"}', 400, 40002),
    ],
)
async def test_error_codes(
    proxies: list[httpx.AsyncClient],
    method: str,
    path: str,
    body: bytes | None,
    status: int,
    code: int,
) -> None:
    v3 = await cluster_path(proxies[0])
    answer = await proxies[0].request(method, path.format(v3=v3), content=body)
    assert answer.status_code == status, answer.text
    assert answer.json()["error_code"] == code
