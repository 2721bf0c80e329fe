"""Confluent's API over HTTP (in-process): shapes, content type, error bodies, no partial writes."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from tests.unit.schema_registry.conftest import avro_record
from yak.metadata.memory_store import MemoryMetadataStore
from yak_schema_registry.api.wire import MEDIA_TYPE, VERSION_PATTERN, parse_version
from yak_schema_registry.errors import InvalidVersionError

A = {"name": "a", "type": "int"}
B = {"name": "b", "type": "string"}
HEADERS = {"Content-Type": MEDIA_TYPE}


async def _post(client: httpx.AsyncClient, url: str, body: object) -> httpx.Response:
    return await client.post(url, content=json.dumps(body), headers=HEADERS)


async def test_register_and_read_back_in_confluent_shapes(client: httpx.AsyncClient) -> None:
    text = avro_record(A)
    first = await _post(client, "/subjects/t-value/versions?normalize=False", {"schema": text})
    assert first.status_code == 200
    assert first.headers["content-type"] == MEDIA_TYPE
    assert first.json() == {"id": 1}
    proto = 'syntax = "proto3"; message M { string a = 1; }'
    body = {"schema": proto, "schemaType": "PROTOBUF", "metadata": None, "ruleSet": None}
    assert (await _post(client, "/subjects/p/versions", body)).json() == {"id": 2}

    compact = json.dumps(json.loads(text), separators=(",", ":"))
    assert (await client.get("/schemas/ids/1")).json() == {"schema": compact}
    assert (await client.get("/schemas/ids/2")).json() == {
        "schema": proto,
        "schemaType": "PROTOBUF",
    }
    assert (await client.get("/schemas/ids/1/schema")).json() == json.loads(text)
    assert (await client.get("/schemas/ids/1/versions")).json() == [
        {"subject": "t-value", "version": 1}
    ]
    assert (await client.get("/schemas/ids/1/subjects")).json() == ["t-value"]
    assert (await client.get("/schemas/types")).json() == ["AVRO", "JSON", "PROTOBUF"]
    assert (await client.get("/subjects")).json() == ["p", "t-value"]
    assert (await client.get("/subjects/t-value/versions")).json() == [1]
    latest = await client.get("/subjects/t-value/versions/latest")
    assert latest.json() == {"subject": "t-value", "version": 1, "id": 1, "schema": compact}
    looked_up = await _post(client, "/subjects/t-value?deleted=False", {"schema": text})
    assert looked_up.json() == latest.json()


@pytest.mark.parametrize(
    ("method", "url", "body", "status", "error_code"),
    [
        ("GET", "/schemas/ids/9", None, 404, 40403),
        ("GET", "/subjects/none/versions", None, 404, 40401),
        ("GET", "/subjects/none/versions/1", None, 404, 40401),
        ("GET", "/subjects/t/versions/2", None, 404, 40402),
        ("GET", "/subjects/t/versions/zero", None, 422, 42202),
        ("GET", "/subjects/t/versions/0", None, 422, 42202),
        ("POST", "/subjects/t", {"schema": avro_record(B)}, 404, 40403),
        ("POST", "/subjects/t/versions", {"schema": "{"}, 422, 42201),
        ("POST", "/subjects/t/versions", {"schema": "1", "schemaType": "XML"}, 422, 42201),
        ("POST", "/subjects/t/versions", {"schemaType": "AVRO"}, 422, 422),
        ("POST", "/subjects/t/versions", {"schema": avro_record(A, B)}, 409, 409),
        ("PUT", "/config", {"compatibility": "SIDEWAYS"}, 422, 42203),
        ("PUT", "/config", {"compatibility": "FULL", "compatibilityLevel": "UP"}, 422, 42203),
        ("PUT", "/config", {}, 422, 42203),
        ("PUT", "/mode", {"mode": "WRITEONLY"}, 422, 42204),
        ("GET", "/config/t", None, 404, 40408),
        ("GET", "/mode/t", None, 404, 40409),
        ("DELETE", "/subjects/t?permanent=true", None, 404, 40405),
        ("DELETE", "/subjects/t/versions/1?permanent=true", None, 404, 40407),
        ("GET", "/no/such/route", None, 404, 404),
        ("PUT", "/schemas/types", None, 405, 405),
    ],
)
async def test_errors_have_confluent_codes_and_change_nothing(
    client: httpx.AsyncClient,
    store: MemoryMetadataStore,
    method: str,
    url: str,
    body: object,
    status: int,
    error_code: int,
) -> None:
    await _post(client, "/subjects/t/versions", {"schema": avro_record(A)})
    before = await store.range_prefix("/yak/unit/")
    content = None if body is None else json.dumps(body)
    answer = await client.request(method, url, content=content, headers=HEADERS)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == MEDIA_TYPE
    assert answer.json()["error_code"] == error_code
    assert isinstance(answer.json()["message"], str)
    assert (await store.range_prefix("/yak/unit/")).kvs == before.kvs


async def test_compatibility_checks_with_and_without_verbose(client: httpx.AsyncClient) -> None:
    await _post(client, "/subjects/t/versions", {"schema": avro_record(A)})
    bad = {"schema": avro_record(A, B)}
    quiet = await _post(client, "/compatibility/subjects/t/versions/latest", bad)
    assert quiet.json() == {"is_compatible": False}
    verbose = await _post(client, "/compatibility/subjects/t/versions/1?verbose=True", bad)
    assert verbose.json()["is_compatible"] is False
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in verbose.json()["messages"][0]
    good = {"schema": avro_record(A, {**B, "default": ""})}
    every = await _post(client, "/compatibility/subjects/t/versions", good)
    assert every.json() == {"is_compatible": True}


@pytest.mark.parametrize(
    ("schema_type", "old", "new", "message"),
    [
        (
            "JSON",
            {"type": "object", "properties": {"a": {"type": "integer"}}},
            {"type": "object", "properties": {"a": {"type": "string"}}},
            "refuses documents",
        ),
        (
            "PROTOBUF",
            'syntax = "proto3"; message M { int32 a = 1; }',
            'syntax = "proto3"; message M { string a = 1; }',
            "FIELD_SCALAR_KIND_CHANGED at #/M/1",
        ),
    ],
)
async def test_json_and_protobuf_incompatible_versions_are_409_and_change_nothing(
    client: httpx.AsyncClient,
    store: MemoryMetadataStore,
    schema_type: str,
    old: object,
    new: object,
    message: str,
) -> None:
    def body(schema: object) -> dict[str, str]:
        text = schema if isinstance(schema, str) else json.dumps(schema)
        return {"schema": text, "schemaType": schema_type}

    assert (await _post(client, "/subjects/s/versions", body(old))).json() == {"id": 1}
    before = await store.range_prefix("/yak/unit/")
    refused = await _post(client, "/subjects/s/versions", body(new))
    assert refused.status_code == 409
    assert refused.json()["error_code"] == 409
    assert message in refused.json()["message"]
    assert (await store.range_prefix("/yak/unit/")).kvs == before.kvs
    checked = await _post(client, "/compatibility/subjects/s/versions?verbose=true", body(new))
    assert checked.json()["is_compatible"] is False
    assert (await client.put("/config/s", json={"compatibility": "NONE"})).status_code == 200
    assert (await _post(client, "/subjects/s/versions", body(new))).json() == {"id": 2}


async def test_config_and_mode_round_trips(client: httpx.AsyncClient) -> None:
    assert (await client.get("/config")).json() == {"compatibilityLevel": "BACKWARD"}
    put = await client.put("/config", json={"compatibility": "full"})
    assert put.json() == {"compatibility": "FULL"}
    assert (await client.put("/config/t", json={"compatibility": "NONE"})).status_code == 200
    assert (await client.get("/config/t")).json() == {"compatibilityLevel": "NONE"}
    assert (await client.delete("/config/t")).json() == {"compatibilityLevel": "NONE"}
    defaulted = await client.get("/config/t?defaultToGlobal=true")
    assert defaulted.json() == {"compatibilityLevel": "FULL"}
    assert (await client.put("/mode", json={"mode": "READONLY"})).json() == {"mode": "READONLY"}
    refused = await _post(client, "/subjects/t/versions", {"schema": avro_record(A)})
    assert (refused.status_code, refused.json()["error_code"]) == (422, 42205)
    assert (await client.get("/mode")).json() == {"mode": "READONLY"}


async def test_delete_routes_answer_the_versions_deleted(client: httpx.AsyncClient) -> None:
    await client.put("/config", json={"compatibility": "NONE"})
    await _post(client, "/subjects/t/versions", {"schema": avro_record(A)})
    await _post(client, "/subjects/t/versions", {"schema": avro_record(B)})
    assert (await client.delete("/subjects/t/versions/latest")).json() == 2
    assert (await client.delete("/subjects/t/versions/2?permanent=true")).json() == 2
    assert (await client.delete("/subjects/t")).json() == [1]
    assert (await client.get("/subjects?deleted=true")).json() == ["t"]
    assert (await client.delete("/subjects/t?permanent=true")).json() == [1]
    assert (await client.get("/subjects?deleted=true")).json() == []


async def test_health_and_readiness(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok", "service": "schema-registry"}
    assert (await client.get("/readyz")).status_code == 200


async def test_metrics_count_requests_by_route_template(client: httpx.AsyncClient) -> None:
    await client.get("/subjects/t/versions")
    metrics = (await client.get("/metrics")).text
    assert 'service="schema-registry"' in metrics
    assert 'route="/subjects/{subject}/versions"' in metrics


async def test_the_openapi_document_states_confluent_bodies(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    register = document["paths"]["/subjects/{subject}/versions"]["post"]
    assert set(register["responses"]) >= {"200", "404", "409", "422", "500"}
    error = register["responses"]["409"]["content"][MEDIA_TYPE]["schema"]
    assert error == {"$ref": "#/components/schemas/ErrorBody"}
    ok = register["responses"]["200"]["content"]
    assert list(ok) == [MEDIA_TYPE]


async def test_a_405_allows_every_method_of_the_path(client: httpx.AsyncClient) -> None:
    answer = await client.post("/config/t")
    assert answer.status_code == 405
    assert answer.headers["allow"] == "DELETE, GET, PUT"


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("latest", True),
        ("-1", True),
        ("1", True),
        ("2147483647", True),
        ("2147483648", False),
        ("0", False),
        ("01", False),
        ("-2", False),
    ],
)
def test_the_documented_version_pattern_is_what_the_server_takes(text: str, valid: bool) -> None:
    assert bool(re.fullmatch(VERSION_PATTERN, text)) is valid
    try:
        parse_version(text)
    except InvalidVersionError:
        assert not valid
    else:
        assert valid
