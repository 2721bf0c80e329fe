"""The v3 routes end to end in process: the proxy app and a real broker app on an in-memory
store, hosting topic ``t`` (one partition). Changes that need the controller (topic create and
delete, configs, groups) are in ``tests/integration/rest_proxy/test_v3.py``."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.unit.rest_proxy.inprocess import proxy_and_broker
from yak_rest_proxy.settings import ProxySettings

V3 = "/v3/clusters/local"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with proxy_and_broker(tmp_path, ProxySettings(linger_ms=1)) as (proxy, _app):
        yield proxy


async def read_back(client: httpx.AsyncClient, offset: int, count: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while len(found) < count:
        answer = await client.get(
            "/api/v1/topics/t/partitions/0/records",
            params={
                "offset": offset + len(found),
                "key_encoding": "base64",
                "value_encoding": "base64",
            },
        )
        assert answer.status_code == 200, answer.text
        found += answer.json()["records"]
    return found[:count]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def test_cluster_brokers_topics_partitions_configs(client: httpx.AsyncClient) -> None:
    clusters = (await client.get("/v3/clusters")).json()
    assert clusters["kind"] == "KafkaClusterList"
    assert [c["cluster_id"] for c in clusters["data"]] == ["local"]
    assert clusters["data"][0]["metadata"]["self"] == "http://proxy/v3/clusters/local"
    brokers = (await client.get(f"{V3}/brokers")).json()
    assert [b["broker_id"] for b in brokers["data"]] == [0]
    assert (await client.get(f"{V3}/brokers/0")).json()["kind"] == "KafkaBroker"
    topics = (await client.get(f"{V3}/topics")).json()
    assert [t["topic_name"] for t in topics["data"]] == ["t"]
    topic = (await client.get(f"{V3}/topics/t")).json()
    assert (topic["partitions_count"], topic["replication_factor"]) == (1, 1)
    partitions = (await client.get(f"{V3}/topics/t/partitions")).json()
    assert [p["partition_id"] for p in partitions["data"]] == [0]
    partition = (await client.get(f"{V3}/topics/t/partitions/0")).json()
    assert partition["leader"] == {"related": f"http://proxy{V3}/topics/t/partitions/0/replicas/0"}
    configs = (await client.get(f"{V3}/topics/t/configs")).json()
    names = {c["name"]: c for c in configs["data"]}
    assert names["cleanup.policy"]["value"] == "delete"
    assert names["retention.ms"]["is_default"] is True
    config = (await client.get(f"{V3}/topics/t/configs/cleanup.policy")).json()
    assert (config["kind"], config["source"]) == ("KafkaTopicConfig", "DEFAULT_CONFIG")


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/v3/clusters/other", 404, 404),
        ("/v3/clusters/other/topics", 404, 404),
        (f"{V3}/brokers/7", 404, 404),
        (f"{V3}/topics/nope", 404, 404),
        (f"{V3}/topics/nope/partitions", 404, 404),
        (f"{V3}/topics/t/partitions/3", 404, 404),
        (f"{V3}/topics/t/configs/no.such.config", 404, 404),
        (f"{V3}/topics/t/partitions/x", 422, 422),
        (f"{V3}/topics/bad%20name", 400, 40002),
        (f"{V3}/no-such-resource", 404, 404),
    ],
)
async def test_admin_errors(client: httpx.AsyncClient, path: str, status: int, code: int) -> None:
    answer = await client.get(path)
    assert answer.status_code == status, answer.text
    assert answer.json()["error_code"] == code
    assert answer.json()["message"]


async def test_produce_one_record(client: httpx.AsyncClient) -> None:
    record = {
        "headers": [{"name": "h", "value": b64(b"hv")}],
        "key": {"type": "BINARY", "data": b64(b"\x00key")},
        "value": {"type": "JSON", "data": {"foo": "bar"}},
        "timestamp": "2021-02-05T19:14:42.5Z",
    }
    answer = await client.post(f"{V3}/topics/t/records", json=record)
    assert answer.status_code == 200, answer.text
    report = answer.json()
    assert report["error_code"] == 200
    assert (report["cluster_id"], report["topic_name"], report["partition_id"]) == ("local", "t", 0)
    assert report["key"] == {"type": "BINARY", "size": 4}
    assert report["value"] == {"type": "JSON", "size": 13}
    (stored,) = await read_back(client, report["offset"], 1)
    assert base64.b64decode(stored["key"]) == b"\x00key"
    assert orjson.loads(base64.b64decode(stored["value"])) == {"foo": "bar"}
    assert stored["timestamp"] == 1_612_552_482_500
    assert report["timestamp"] == "2021-02-05T19:14:42.500Z"


async def test_a_stream_is_answered_record_by_record(client: httpx.AsyncClient) -> None:
    async def body() -> AsyncIterator[bytes]:
        for n in range(200):
            value = {"type": "STRING", "data": f"v{n}"}
            # split records across chunks, some newline-separated, some not
            text = orjson.dumps({"value": value}) + (b"\n" if n % 2 else b"")
            yield text[:5]
            yield text[5:]
        yield orjson.dumps({"value": {"type": "AVRO", "data": 1}})
        yield orjson.dumps({"partition_id": 4, "value": {"type": "STRING", "data": "x"}})
        yield orjson.dumps({"value": {"type": "STRING", "data": "last"}})

    answer = await client.post(f"{V3}/topics/t/records", content=body())
    assert answer.status_code == 200
    assert "content-length" not in answer.headers
    reports = [orjson.loads(line) for line in answer.text.splitlines()]
    assert len(reports) == 203
    assert all(r["error_code"] == 200 for r in reports[:200])
    offsets = [r["offset"] for r in reports[:200]]
    assert offsets == list(range(offsets[0], offsets[0] + 200))
    assert reports[200]["error_code"] == 422
    assert reports[201]["error_code"] == 40402
    assert reports[202]["offset"] == offsets[-1] + 1
    stored = await read_back(client, offsets[0], 201)
    values = [base64.b64decode(r["value"]).decode() for r in stored]
    assert values == [f"v{n}" for n in range(200)] + ["last"]


async def test_several_records_of_known_length(client: httpx.AsyncClient) -> None:
    body = b'{"value": {"type": "JSON", "data": 1}} {"value": {"type": "BINARY", "data": "*"}}'
    answer = await client.post(f"{V3}/topics/t/records", content=body)
    assert answer.status_code == 200
    assert [orjson.loads(line)["error_code"] for line in answer.text.splitlines()] == [200, 400]


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        (f"{V3}/topics/nope/records", b'{"value": null}', 404, 40403),
        ("/v3/clusters/other/topics/t/records", b"{}", 404, 404),
        (f"{V3}/topics/t/records", b"", 422, 42206),
        (f"{V3}/topics/t/records", b'{"value": ', 400, 400),
        (f"{V3}/topics/t/records", b"[1, 2]", 400, 400),
        (f"{V3}/topics/t/records", b'{"value": {"type": "BINARY", "data": "!"}}', 400, 400),
        (f"{V3}/topics/t/records", b'{"partition": 0}', 422, 422),
        (f"{V3}/topics/t/records", b'{"partition_id": 5}', 404, 40402),
        (f"{V3}/topics/t/records", b'{"value": {"type": "PROTOBUF", "data": {}}}', 422, 422),
    ],
)
async def test_produce_errors(
    client: httpx.AsyncClient, path: str, body: bytes, status: int, code: int
) -> None:
    answer = await client.post(path, content=body)
    assert answer.status_code == status, answer.text
    assert answer.json()["error_code"] == code
