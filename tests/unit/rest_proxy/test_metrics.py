"""The proxy's latency budget on ``/metrics``: each produce and poll observes each of its stages
once. The whole path in process: the proxy app and a real broker app (its HTTP data plane
through an ASGI transport) on one in-memory metadata store."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.rest_proxy.inprocess import proxy_and_broker
from yak_rest_proxy.settings import ProxySettings

PRODUCE = "yak_proxy_produce_stage_seconds"
POLL = "yak_proxy_poll_stage_seconds"
PRODUCE_STAGES = ("read", "parse", "queue", "sender", "broker", "render")
POLL_STAGES = ("reconcile", "fetch", "decode", "render", "save")
V2_JSON = "application/vnd.kafka.json.v2+json"
V2 = "application/vnd.kafka.v2+json"


@pytest.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the proxy, whose one broker (id 0) hosts topic ``t`` (one partition)."""
    async with proxy_and_broker(tmp_path, ProxySettings(linger_ms=0)) as (client, _app):
        yield client


async def counts(proxy: httpx.AsyncClient, name: str, stages: tuple[str, ...]) -> dict[str, int]:
    """How many observations each stage of histogram ``name`` holds, from ``/metrics``."""
    answer = await proxy.get("/metrics")
    assert answer.status_code == 200
    found = dict.fromkeys(stages, 0)
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            if sample.name == f"{name}_count":
                found[sample.labels["stage"]] = int(sample.value)
    return found


async def test_a_native_produce_observes_each_stage_once(proxy: httpx.AsyncClient) -> None:
    body = {"records": [{"value": {"n": 1}}, {"value": {"n": 2}, "partition": 0}]}
    answer = await proxy.post("/api/v1/topics/t/records", json=body)
    assert answer.status_code == 200, answer.text
    assert await counts(proxy, PRODUCE, PRODUCE_STAGES) == dict.fromkeys(PRODUCE_STAGES, 1)


async def test_a_v2_produce_observes_each_stage_once(proxy: httpx.AsyncClient) -> None:
    body = {"records": [{"value": {"n": 1}}]}
    answer = await proxy.post("/topics/t", json=body, headers={"content-type": V2_JSON})
    assert answer.status_code == 200, answer.text
    assert await counts(proxy, PRODUCE, PRODUCE_STAGES) == dict.fromkeys(PRODUCE_STAGES, 1)


async def test_an_idempotent_batch_observes_each_stage_but_the_queue(
    proxy: httpx.AsyncClient,
) -> None:
    session = (await proxy.post("/api/v1/producers")).json()
    body = {
        **session,
        "base_sequence": 0,
        "records": [{"value": base64.b64encode(b"v").decode()}],
        "value_encoding": "base64",
    }
    answer = await proxy.post("/api/v1/topics/t/partitions/0/batches", json=body)
    assert answer.status_code == 200, answer.text
    assert await counts(proxy, PRODUCE, PRODUCE_STAGES) == {
        **dict.fromkeys(PRODUCE_STAGES, 1),
        "queue": 0,  # not batched by the proxy's producer
    }


async def test_a_stateless_read_observes_fetch_decode_and_render(
    proxy: httpx.AsyncClient,
) -> None:
    await proxy.post("/api/v1/topics/t/records", json={"records": [{"value": 1}]})
    answer = await proxy.get("/api/v1/topics/t/partitions/0/records", params={"offset": 0})
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["records"]) == 1
    assert await counts(proxy, POLL, POLL_STAGES) == {
        "reconcile": 0,  # no member: nothing to load from etcd
        "fetch": 1,
        "decode": 1,
        "render": 1,
        "save": 0,  # no position to keep
    }


async def test_a_group_poll_observes_each_stage_once(proxy: httpx.AsyncClient) -> None:
    await proxy.post("/api/v1/topics/t/records", json={"records": [{"value": 1}]})
    base = "/consumers/g"
    created = await proxy.post(
        base,
        json={"name": "c1", "format": "json", "auto.offset.reset": "earliest"},
        headers={"content-type": V2},
    )
    assert created.status_code == 200, created.text
    instance = f"{base}/instances/c1"
    assigned = await proxy.post(
        f"{instance}/assignments",
        json={"partitions": [{"topic": "t", "partition": 0}]},
        headers={"content-type": V2},
    )
    assert assigned.status_code == 204, assigned.text
    polled = await proxy.get(
        f"{instance}/records", params={"timeout": 1000}, headers={"accept": V2_JSON}
    )
    assert polled.status_code == 200, polled.text
    assert len(polled.json()) == 1
    assert await counts(proxy, POLL, POLL_STAGES) == dict.fromkeys(POLL_STAGES, 1)
