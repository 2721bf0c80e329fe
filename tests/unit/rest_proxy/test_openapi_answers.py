"""Answers the proxy's OpenAPI document promises, in process: 405 ``Allow``, offsets timestamps."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.rest_proxy.inprocess import proxy_and_broker
from yak_rest_proxy.app import create_app
from yak_rest_proxy.settings import ProxySettings

_OFFSETS = "/api/v1/topics/t/partitions/0/offsets"


@pytest.mark.parametrize("timestamp", ["²", "1\n", "", "1" * 19, "Latest"])
async def test_a_timestamp_outside_the_documented_pattern_is_a_400(
    tmp_path: Path, timestamp: str
) -> None:
    async with proxy_and_broker(tmp_path, ProxySettings()) as (client, _app):
        answer = await client.get(_OFFSETS, params={"timestamp": timestamp})

    assert (answer.status_code, answer.json()["code"]) == (400, "INVALID_REQUEST"), answer.text


async def test_documented_timestamps_are_answered(tmp_path: Path) -> None:
    async with proxy_and_broker(tmp_path, ProxySettings()) as (client, _app):
        for timestamp in ("earliest", "latest", "0"):
            answer = await client.get(_OFFSETS, params={"timestamp": timestamp})
            assert answer.status_code == 200, answer.text


async def test_a_405_allows_every_method_of_the_path_in_both_dialects(tmp_path: Path) -> None:
    async with proxy_and_broker(tmp_path, ProxySettings()) as (client, app):
        native = await client.put("/api/v1/topics/t")
        v2 = await client.put("/consumers/g/instances/i/subscription")
        document = app.openapi()

    assert native.status_code == v2.status_code == 405
    assert native.json()["code"] == "METHOD_NOT_ALLOWED"
    assert v2.json()["error_code"] == 405
    subscription = "/consumers/{group}/instances/{instance}/subscription"
    for answer, path in ((native, "/api/v1/topics/{topic}"), (v2, subscription)):
        documented = {method.upper() for method in document["paths"][path]}
        assert set(answer.headers["allow"].split(", ")) == documented


def test_v3_bodies_keep_their_own_schemas_beside_native_ones_of_the_same_name() -> None:
    document = create_app(ProxySettings()).openapi()
    body = document["paths"]["/v3/clusters/{cluster_id}/topics/{topic}/records"]["post"]
    ref = body["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schemas = document["components"]["schemas"]

    assert ref == "#/components/schemas/V3ProduceRecord"
    assert "partition_id" in schemas["V3ProduceRecord"]["properties"]
    assert "deliver_after_ms" in schemas["ProduceRecord"]["properties"]


@pytest.mark.parametrize("instance", ["nobody", "%C3%97%C3%B8"])
async def test_a_seek_of_nothing_still_needs_its_instance(tmp_path: Path, instance: str) -> None:
    """Empty ``offsets`` and ``timestamps`` move nothing, but an instance that does not exist
    (or could not: a name outside the documented pattern) is not a 204."""
    async with proxy_and_broker(tmp_path, ProxySettings()) as (client, _app):
        answer = await client.post(
            f"/consumers/g/instances/{instance}/positions",
            json={"offsets": [], "timestamps": []},
            headers={"content-type": "application/vnd.kafka.v2+json"},
        )

    assert (answer.status_code, answer.json()["error_code"]) == (404, 40403), answer.text


def test_readyz_declares_its_own_bodies_not_the_error_body() -> None:
    document = create_app(ProxySettings()).openapi()
    answers = document["paths"]["/readyz"]["get"]["responses"]
    for status in ("200", "503"):
        assert answers[status]["content"]["application/json"]["schema"]["title"] == "Readiness"
