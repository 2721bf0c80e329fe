"""The schema formats through the proxy's real routes, in process: the proxy app, a real broker
app and the registry app (``yak-schema-registry``'s, reached through an ASGI transport), topic
``t`` with one partition. v2 produce and a v2 consumer reading back, v3 produce, and each
documented refusal writing nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pytest

from tests.unit.rest_proxy.inprocess import proxy_and_broker
from yak.metadata.memory_store import MemoryMetadataStore
from yak_rest_proxy.schemas import RegistryClient, Schemas
from yak_rest_proxy.settings import ProxySettings
from yak_schema_registry.app import create_app as create_registry

AVRO_SCHEMA = json.dumps(
    {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
)
JSON_SCHEMA = json.dumps({"type": "object", "properties": {"name": {"type": "string"}}})
PROTO_SCHEMA = 'syntax = "proto3"; message User { string name = 1; }'
SCHEMAS = {"avro": AVRO_SCHEMA, "jsonschema": JSON_SCHEMA, "protobuf": PROTO_SCHEMA}
BAD_VALUES = {"avro": {"name": 5}, "jsonschema": {"name": 5}, "protobuf": {"nom": "x"}}


class Proxy(NamedTuple):
    client: httpx.AsyncClient
    registry: httpx.AsyncClient


def vnd(fmt: str) -> dict[str, str]:
    """A produce body's type (its answer is ``application/vnd.kafka.v2+json``)."""
    return {"content-type": media(fmt)}


def media(fmt: str) -> str:
    return f"application/vnd.kafka.{fmt}.v2+json"


@pytest.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[Proxy]:
    store = MemoryMetadataStore()
    registry_app = create_registry(store=store)
    to_registry = httpx.ASGITransport(app=registry_app)
    settings = ProxySettings(schema_registry_url="http://registry")
    async with (
        registry_app.router.lifespan_context(registry_app),
        httpx.AsyncClient(transport=to_registry, base_url="http://registry") as registry,
        proxy_and_broker(tmp_path, settings) as (client, app),
    ):
        runtime = app.state.runtime
        await runtime.schemas.aclose()  # the settings' client: this one reaches the app
        runtime.schemas = Schemas(RegistryClient("http://registry", transport=to_registry))
        yield Proxy(client, registry)
    await store.aclose()


async def end_offset(proxy: Proxy) -> int:
    answer = await proxy.client.get("/topics/t/partitions/0/offsets")
    return int(answer.json()["end_offset"])


async def read_back(proxy: Proxy, fmt: str, name: str) -> httpx.Response:
    """A ``fmt`` consumer assigned ``t``/0 from the beginning; its first non-empty read."""
    base = f"/consumers/g-{name}"
    created = await proxy.client.post(base, json={"name": name, "format": fmt})
    assert created.status_code == 200, created.text
    instance = f"{base}/instances/{name}"
    partitions = {"partitions": [{"topic": "t", "partition": 0}]}
    assert (await proxy.client.post(f"{instance}/assignments", json=partitions)).status_code == 204
    assert (
        await proxy.client.post(f"{instance}/positions/beginning", json=partitions)
    ).status_code == 204
    return await proxy.client.get(
        f"{instance}/records?timeout=2000", headers={"accept": media(fmt)}
    )


@pytest.mark.parametrize("fmt", ["avro", "jsonschema", "protobuf"])
async def test_v2_produce_then_consume(proxy: Proxy, fmt: str) -> None:
    body: dict[str, Any] = {
        "value_schema": SCHEMAS[fmt],
        "records": [{"value": {"name": "ann"}}, {"value": {"name": "bob"}}],
    }
    produced = await proxy.client.post("/topics/t", json=body, headers=vnd(fmt))
    assert produced.status_code == 200, produced.text
    answer = produced.json()
    assert answer["key_schema_id"] is None
    schema_id = answer["value_schema_id"]
    assert [o["offset"] for o in answer["offsets"]] == [0, 1]
    registered = (await proxy.registry.get("/subjects/t-value/versions/latest")).json()
    assert registered["id"] == schema_id
    again = await proxy.client.post(
        "/topics/t/partitions/0",
        json={"value_schema_id": schema_id, "records": [{"value": {"name": "cy"}}]},
        headers=vnd(fmt),
    )
    assert again.json()["value_schema_id"] == schema_id
    read = await read_back(proxy, fmt, f"c-{fmt}")
    assert read.status_code == 200, read.text
    assert read.headers["content-type"] == media(fmt)
    assert [r["value"] for r in read.json()] == [{"name": n} for n in ("ann", "bob", "cy")]


async def test_keys_have_their_own_subject(proxy: Proxy) -> None:
    key_schema = json.dumps({"type": "string"})
    body = {
        "key_schema": key_schema,
        "value_schema": AVRO_SCHEMA,
        "records": [{"key": "k1", "value": {"name": "ann"}}],
    }
    answer = (await proxy.client.post("/topics/t", json=body, headers=vnd("avro"))).json()
    assert answer["key_schema_id"] != answer["value_schema_id"]
    key = (await proxy.registry.get("/subjects/t-key/versions/1")).json()
    assert key["id"] == answer["key_schema_id"]
    read = await read_back(proxy, "avro", "keys")
    assert [(r["key"], r["value"]) for r in read.json()] == [("k1", {"name": "ann"})]


@pytest.mark.parametrize(
    ("fmt", "body", "status", "code"),
    [
        ("avro", {"value_schema": AVRO_SCHEMA, "records": [{"value": {"name": 5}}]}, 422, 42203),
        (  # a request's values are checked by column first (avro_unchecked)
            "avro",
            {
                "value_schema": AVRO_SCHEMA,
                "records": [{"value": {"name": "a"}}] * 5 + [{"value": {"name": 5}}],
            },
            422,
            42203,
        ),
        (
            "jsonschema",
            {"value_schema": JSON_SCHEMA, "records": [{"value": {"name": 5}}]},
            422,
            42203,
        ),
        ("protobuf", {"value_schema": PROTO_SCHEMA, "records": [{"value": {"x": 1}}]}, 422, 42203),
        ("avro", {"value_schema": '{"type": "nope"}', "records": [{"value": 1}]}, 422, 42205),
        ("avro", {"value_schema_id": 999, "records": [{"value": {"name": "a"}}]}, 422, 42205),
        ("avro", {"records": [{"value": {"name": "a"}}]}, 422, 42202),
        (
            "avro",
            {"value_schema": AVRO_SCHEMA, "records": [{"key": "k", "value": None}]},
            422,
            42201,
        ),
    ],
)
async def test_v2_refusals_write_nothing(
    proxy: Proxy, fmt: str, body: dict[str, Any], status: int, code: int
) -> None:
    # One good record first, so that a refused request is seen to add none after it.
    good = {"value_schema": SCHEMAS[fmt], "records": [{"value": {"name": "ok"}}]}
    assert (await proxy.client.post("/topics/t", json=good, headers=vnd(fmt))).status_code == 200
    refused = await proxy.client.post("/topics/t", json=body, headers=vnd(fmt))
    assert (refused.status_code, refused.json()["error_code"]) == (status, code), refused.text
    assert await end_offset(proxy) == 1


async def test_a_json_schema_id_is_not_an_avro_schema(proxy: Proxy) -> None:
    good = {"value_schema": JSON_SCHEMA, "records": [{"value": {"name": "ok"}}]}
    schema_id = (await proxy.client.post("/topics/t", json=good, headers=vnd("jsonschema"))).json()[
        "value_schema_id"
    ]
    body = {"value_schema_id": schema_id, "records": [{"value": {"name": "a"}}]}
    refused = await proxy.client.post("/topics/t", json=body, headers=vnd("avro"))
    assert (refused.status_code, refused.json()["error_code"]) == (422, 42205)
    assert "not AVRO" in refused.json()["message"]


async def test_a_record_not_in_the_wire_format_stops_the_consumer(proxy: Proxy) -> None:
    binary = {"records": [{"value": "bm90IGF2cm8="}]}
    sent = await proxy.client.post("/topics/t", json=binary, headers=vnd("binary"))
    assert sent.status_code == 200
    first = await read_back(proxy, "avro", "poison")
    assert (first.status_code, first.json()["error_code"]) == (500, 50002)
    assert "t/0@0" in first.json()["message"]
    again = await proxy.client.get(
        "/consumers/g-poison/instances/poison/records?timeout=200",
        headers={"accept": media("avro")},
    )
    assert (again.status_code, again.json()["error_code"]) == (500, 50002)  # not skipped


async def test_v3_produce_with_schema_id_inline_schema_and_latest(proxy: Proxy) -> None:
    path = "/v3/clusters/local/topics/t/records"
    inline = {"value": {"type": "AVRO", "schema": AVRO_SCHEMA, "data": {"name": "ann"}}}
    first = await proxy.client.post(path, json=inline)
    assert first.status_code == 200, first.text
    assert first.json()["value"]["type"] == "AVRO"
    schema_id = (await proxy.registry.get("/subjects/t-value/versions/1")).json()["id"]
    by_id = {"value": {"type": "AVRO", "schema_id": schema_id, "data": {"name": "bob"}}}
    latest = {"value": {"data": {"name": "cy"}}}  # no type: the subject's latest schema
    stream = b"".join(json.dumps(r).encode() for r in (by_id, latest))
    answer = await proxy.client.post(path, content=stream)
    reports = [json.loads(line) for line in answer.text.splitlines()]
    assert [r["error_code"] for r in reports] == [200, 200], reports
    bad = {"value": {"type": "AVRO", "schema_id": schema_id, "data": {"name": 1}}}
    refused = await proxy.client.post(path, json=bad)
    assert (refused.status_code, refused.json()["error_code"]) == (400, 400)
    read = await read_back(proxy, "avro", "v3")
    assert [r["value"]["name"] for r in read.json()] == ["ann", "bob", "cy"]


async def test_without_a_registry_the_formats_are_refused(tmp_path: Path) -> None:
    async with proxy_and_broker(tmp_path, ProxySettings()) as (client, _app):
        body = {"value_schema": AVRO_SCHEMA, "records": [{"value": {"name": "a"}}]}
        refused = await client.post("/topics/t", json=body, headers=vnd("avro"))
        assert (refused.status_code, refused.json()["error_code"]) == (415, 41501)
        assert "YAK_SCHEMA_REGISTRY_URL" in refused.json()["message"]
        created = await client.post("/consumers/g", json={"name": "c", "format": "protobuf"})
        assert (created.status_code, created.json()["error_code"]) == (422, 42204)
        v3 = {"value": {"type": "AVRO", "schema_id": 1, "data": {}}}
        answer = await client.post("/v3/clusters/local/topics/t/records", json=v3)
        assert (answer.status_code, answer.json()["error_code"]) == (422, 422)


def _produce_types(document: dict[str, Any]) -> set[str]:
    return set(document["paths"]["/topics/{topic}"]["post"]["requestBody"]["content"])


async def test_the_schema_types_are_documented_only_with_a_registry(
    proxy: Proxy, tmp_path: Path
) -> None:
    with_registry = _produce_types((await proxy.client.get("/openapi.json")).json())
    assert {media(f) for f in SCHEMAS} <= with_registry
    async with proxy_and_broker(tmp_path / "plain", ProxySettings()) as (client, _app):
        without = _produce_types((await client.get("/openapi.json")).json())
    assert not {media(f) for f in SCHEMAS} & without
    assert media("json") in without
