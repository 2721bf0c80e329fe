"""Tests for yak_broker.server.scheduled through the broker's admin routes: the listing of a led
partition's scheduled records, paged, and the cancel (a replicated control batch), with the
refusals: not delayed, cancelled already, already due, delays not enabled."""

from __future__ import annotations

import time

from tests.unit.broker.broker_harness import BrokerHarness
from yak.delays import delay_header
from yak.record import RecordInput, encode_batch
from yak.record.batch import decode_batch
from yak.topic_config import DELAYED_DELIVERY_ENABLE
from yak.types import TopicPartition

DELAYS = {DELAYED_DELIVERY_ENABLE: "true"}


def _now() -> int:
    return time.time_ns() // 1_000_000


async def _produce(broker: BrokerHarness, topic: str, *dues: int | None) -> None:
    records = [
        RecordInput(value=b"v", headers=(delay_header(d),) if d is not None else ()) for d in dues
    ]
    await broker.client.produce_one(topic, 0, encode_batch(records))


async def test_listing_pages_in_due_order(broker: BrokerHarness) -> None:
    await broker.create_topic("d", configs=DELAYS)
    now = _now()
    await _produce(broker, "d", now + 30_000, None, now + 10_000, now + 20_000)
    answer = await broker.http.get("/v1/scheduled/d/0", params={"limit": 2})
    assert answer.status_code == 200, answer.text
    page = answer.json()
    assert [(r["offset"], r["deliver_at"]) for r in page["records"]] == [
        (2, now + 10_000),
        (3, now + 20_000),
    ]
    assert page["next"] == {"after_ms": now + 20_000, "after_offset": 3}
    answer = await broker.http.get("/v1/scheduled/d/0", params={"limit": 2, **page["next"]})
    assert [r["offset"] for r in answer.json()["records"]] == [0]
    assert answer.json()["next"] is None


async def test_cancel_appends_a_control_batch_and_the_listing_drops_it(
    broker: BrokerHarness,
) -> None:
    await broker.create_topic("d", configs=DELAYS)
    now = _now()
    await _produce(broker, "d", now + 60_000, now + 70_000, None, now - 1_000)
    answer = await broker.http.delete("/v1/scheduled/d/0/1")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"topic": "d", "partition": 0, "offset": 1, "deliver_at": now + 70_000}
    listed = (await broker.http.get("/v1/scheduled/d/0")).json()["records"]
    assert [r["offset"] for r in listed] == [0]
    log = broker.broker.replicas.replicas[TopicPartition("d", 0)].log
    assert log.log_end_offset == 5
    assert decode_batch(log.read(4, 1 << 16).records).header.is_control
    again = await broker.http.delete("/v1/scheduled/d/0/1")
    assert (again.status_code, again.json()["code"]) == (404, "SCHEDULED_RECORD_NOT_FOUND")
    plain = await broker.http.delete("/v1/scheduled/d/0/2")
    assert (plain.status_code, plain.json()["code"]) == (404, "SCHEDULED_RECORD_NOT_FOUND")
    due = await broker.http.delete("/v1/scheduled/d/0/3")
    assert (due.status_code, due.json()["code"]) == (409, "RECORD_ALREADY_DUE")
    beyond = await broker.http.delete("/v1/scheduled/d/0/99")
    assert beyond.status_code == 404
    assert log.log_end_offset == 5  # no refusal wrote anything


async def test_a_topic_without_delays_has_no_schedules(broker: BrokerHarness) -> None:
    await broker.create_topic("t")
    await _produce(broker, "t", None)
    answer = await broker.http.get("/v1/scheduled/t/0")
    assert (answer.status_code, answer.json()["code"]) == (400, "DELAYS_NOT_ENABLED")
    answer = await broker.http.delete("/v1/scheduled/t/0/0")
    assert (answer.status_code, answer.json()["code"]) == (400, "DELAYS_NOT_ENABLED")


async def test_a_partition_led_elsewhere_is_not_answered_here(broker: BrokerHarness) -> None:
    await broker.register_peer(1)
    await broker.create_topic("d", configs=DELAYS, leader=1, replicas=(1, 0))
    answer = await broker.http.get("/v1/scheduled/d/0")
    assert answer.json()["code"] == "NOT_LEADER_OR_FOLLOWER"
