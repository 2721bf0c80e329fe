"""The registry's OpenAPI document says what the app answers (``api.openapi``)."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema
import pytest

from yak_schema_registry.api.wire import MEDIA_TYPE


async def _document(client: httpx.AsyncClient) -> dict[str, Any]:
    answer = await client.get("/openapi.json")
    assert answer.status_code == 200
    document: dict[str, Any] = answer.json()
    return document


async def test_the_health_checks_are_documented_as_the_json_they_answer(
    client: httpx.AsyncClient,
) -> None:
    document = await _document(client)
    for path in ("/healthz", "/readyz"):
        answer = await client.get(path)
        assert answer.headers["content-type"] == "application/json"
        assert list(document["paths"][path]["get"]["responses"]["200"]["content"]) == [
            "application/json"
        ]
    not_ready = document["paths"]["/readyz"]["get"]["responses"]["503"]["content"]
    assert not_ready["application/json"]["schema"]["title"] == "Readiness"


async def test_a_405_is_documented_with_allow_and_confluent_body(
    client: httpx.AsyncClient,
) -> None:
    document = await _document(client)
    answer = await client.post("/config/t")
    declared = document["paths"]["/config/{subject}"]["get"]["responses"]["405"]
    assert answer.status_code == 405
    assert "Allow" in declared["headers"]
    assert answer.headers["content-type"] == MEDIA_TYPE
    ref = declared["content"][MEDIA_TYPE]["schema"]["$ref"]
    schema = document["components"]["schemas"][ref.removeprefix("#/components/schemas/")]
    jsonschema.validate(answer.json(), schema)


@pytest.mark.parametrize(
    ("body", "valid"),
    [
        ({}, False),
        ({"compatibility": None}, False),
        ({"compatibility": None, "compatibilityLevel": "FULL"}, True),
        ({"compatibility": "SOME"}, False),
        ({"compatibility": "FULL"}, True),
        ({"compatibilityLevel": "NONE"}, True),
        ({"compatibility": "FULL", "compatibilityLevel": "BACKWARD"}, True),
    ],
)
async def test_a_config_body_the_document_takes_is_one_the_server_takes(
    client: httpx.AsyncClient, body: dict[str, object], valid: bool
) -> None:
    schema = (await _document(client))["components"]["schemas"]["ConfigBody"]
    assert jsonschema.Draft202012Validator(schema).is_valid(body) is valid
    answer = await client.put("/config/s", json=body)
    assert (answer.status_code == 200) is valid, answer.text


async def test_a_registration_links_to_what_uses_the_version(client: httpx.AsyncClient) -> None:
    paths = (await _document(client))["paths"]
    links = paths["/subjects/{subject}/versions"]["post"]["responses"]["200"]["links"]
    by_id = links["GET /schemas/ids/{schema_id}"]["parameters"]
    assert by_id == {"path.schema_id": "$response.body#/id"}
    version = links["GET /subjects/{subject}/versions/{version}"]["parameters"]
    assert version == {"path.subject": "$request.path.subject", "path.version": "latest"}
    assert "PUT /mode/{subject}" in links
    found = paths["/subjects/{subject}"]["post"]["responses"]["200"]["links"]
    assert found["DELETE /subjects/{subject}/versions/{version}"]["parameters"] == {
        "path.subject": "$request.path.subject",
        "path.version": "$response.body#/version",
    }


@pytest.mark.parametrize(
    "body",
    [
        {"schema": '"string"', "version": False},
        {"schema": '"string"', "id": "1"},
        {"schema": '"string"', "version": 0},
        {"schema": '"string"', "id": 2**31},
        {"schema": '"string"', "references": [{"name": "a", "subject": "s", "version": True}]},
    ],
)
async def test_a_body_of_the_wrong_types_is_refused_as_the_document_says(
    client: httpx.AsyncClient, body: dict[str, object]
) -> None:
    schema = (await _document(client))["components"]["schemas"]
    validator = jsonschema.Draft202012Validator(
        {"$ref": "#/components/schemas/SchemaBody", "components": {"schemas": schema}}
    )
    assert not validator.is_valid(body)
    answer = await client.post("/subjects/s/versions", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error_code"] == 422
