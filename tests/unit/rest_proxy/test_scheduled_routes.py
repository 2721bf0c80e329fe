"""Tests for yak_rest_proxy.api.native.scheduled_routes: the proxy lists and cancels the
scheduled records of a real in-process broker's delay index (topic ``d`` allows delays, ``t``
does not), with the broker's answers and error codes; the routes are in the ACL table."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from tests.unit.rest_proxy.delays_inprocess import proxy_with_delays
from yak.security.acl import Operation
from yak.types import TopicPartition
from yak_rest_proxy.security.route_acls import AUDITED, ROUTE_ACLS

_BASE = "/api/v1/topics/{topic}/partitions/0/scheduled"


async def _produce(client: httpx.AsyncClient, topic: str, records: list[dict[str, object]]) -> None:
    answer = await client.post(f"/api/v1/topics/{topic}/records", json={"records": records})
    assert answer.status_code == 200, answer.text


async def test_lists_pending_schedules_in_due_order_by_pages(tmp_path: Path) -> None:
    async with proxy_with_delays(tmp_path) as (client, _broker):
        now = int(time.time() * 1000)
        await _produce(
            client,
            "d",
            [
                {"value": 0, "deliver_after_ms": 300_000},
                {"value": 1},  # not delayed: never listed
                {"value": 2, "deliver_at": now + 100_000},
                {"value": 3, "deliver_after_ms": 200_000},
            ],
        )
        answer = await client.get(_BASE.format(topic="d"), params={"limit": 2})
        assert answer.status_code == 200, answer.text
        page = answer.json()
        assert (page["topic"], page["partition"]) == ("d", 0)
        assert [r["offset"] for r in page["records"]] == [2, 3]
        assert page["records"][0]["deliver_at"] == now + 100_000
        assert page["next"] == {"after_ms": page["records"][1]["deliver_at"], "after_offset": 3}

        rest = await client.get(_BASE.format(topic="d"), params={"limit": 2, **page["next"]})
        assert [r["offset"] for r in rest.json()["records"]] == [0]
        assert rest.json()["next"] is None


async def test_cancel_removes_a_schedule_once(tmp_path: Path) -> None:
    async with proxy_with_delays(tmp_path) as (client, broker):
        await _produce(
            client, "d", [{"value": 0, "deliver_after_ms": 60_000}, {"value": 1}, {"value": 2}]
        )
        url = _BASE.format(topic="d")
        cancelled = await client.delete(f"{url}/0")
        assert cancelled.status_code == 200, cancelled.text
        body = cancelled.json()
        assert (body["topic"], body["partition"], body["offset"]) == ("d", 0, 0)
        assert body["deliver_at"] > time.time() * 1000
        assert (await client.get(url)).json()["records"] == []
        # the cancel is a control batch in the log, after the three records
        log = broker.broker.replicas.replicas[TopicPartition("d", 0)].log
        assert log.high_watermark == 4

        again = await client.delete(f"{url}/0")
        assert (again.status_code, again.json()["code"]) == (404, "SCHEDULED_RECORD_NOT_FOUND")
        plain = await client.delete(f"{url}/1")
        assert (plain.status_code, plain.json()["code"]) == (404, "SCHEDULED_RECORD_NOT_FOUND")
        beyond = await client.delete(f"{url}/99")
        assert beyond.status_code == 404


async def test_a_due_record_cannot_be_cancelled(tmp_path: Path) -> None:
    async with proxy_with_delays(tmp_path) as (client, _broker):
        past = int(time.time() * 1000) - 1_000
        await _produce(client, "d", [{"value": 0, "deliver_at": past}])
        answer = await client.delete(f"{_BASE.format(topic='d')}/0")
        assert (answer.status_code, answer.json()["code"]) == (409, "RECORD_ALREADY_DUE")


async def test_refusals_before_any_broker_call(tmp_path: Path) -> None:
    async with proxy_with_delays(tmp_path) as (client, _broker):
        plain = await client.get(_BASE.format(topic="t"))
        assert (plain.status_code, plain.json()["code"]) == (400, "DELAYS_NOT_ENABLED")
        cancel = await client.delete(f"{_BASE.format(topic='t')}/0")
        assert (cancel.status_code, cancel.json()["code"]) == (400, "DELAYS_NOT_ENABLED")
        missing = await client.get(_BASE.format(topic="nope"))
        assert (missing.status_code, missing.json()["code"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION")
        no_partition = await client.get("/api/v1/topics/d/partitions/7/scheduled")
        assert no_partition.json()["code"] == "UNKNOWN_TOPIC_OR_PARTITION"
        for limit in (0, 10_001):
            bad = await client.get(_BASE.format(topic="d"), params={"limit": limit})
            assert bad.status_code == 400, bad.text


def test_listing_needs_describe_and_cancel_write_and_is_audited() -> None:
    path = "/api/v1/topics/{topic}/partitions/{partition}/scheduled"
    listing = ROUTE_ACLS[("GET", path)]
    cancel = ROUTE_ACLS[("DELETE", f"{path}/{{offset}}")]
    assert listing is not None
    assert cancel is not None
    assert [c.operation for c in listing] == [Operation.DESCRIBE]
    assert [c.operation for c in cancel] == [Operation.WRITE]
    assert ("DELETE", f"{path}/{{offset}}") in AUDITED
    assert ("GET", path) not in AUDITED
