"""Quotas on the Kafka listener: the throttle time of a principal's bytes (defaults, etcd
overrides, unlimited), the answer held for it, and Produce/Fetch answers carrying
``throttle_time_ms`` on an in-process broker (PLAINTEXT: ``User:ANONYMOUS``; SASL: the user's
own override)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.unit.broker.broker_harness import BrokerHarness
from tests.unit.broker.kafka.kafka_test_client import KafkaTestConnection, kafka_port
from tests.unit.broker.kafka.secured_broker import secured_broker
from tests.unit.broker.kafka.test_kafka_apis import fetch12_request
from tests.unit.broker.kafka.test_kafka_listener import batch, fetch_request, produce_request
from yak.clock import FakeClock
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.security import AclBinding, Operation, ResourceType
from yak.security.quota_overrides import QuotaOverrides
from yak.security.quota_store import QuotaConfig, QuotaStore
from yak_broker.app import create_app
from yak_broker.kafka.context import ANONYMOUS
from yak_broker.kafka.quotas import MAX_THROTTLE_MS, KafkaQuotas, QuotaKind
from yak_broker.settings import BrokerSettings

KS = Keyspace("local")
PRODUCE, FETCH = QuotaKind.PRODUCE, QuotaKind.FETCH


def test_no_quota_costs_nothing() -> None:
    quotas = KafkaQuotas(None, clock=FakeClock())
    assert not quotas.active
    assert quotas.throttle_ms(PRODUCE, ANONYMOUS, 10**9) == 0


def test_bytes_over_a_default_rate_are_throttled_until_repaid() -> None:
    clock = FakeClock()
    quotas = KafkaQuotas(None, produce_bytes_per_s=1000, clock=clock)
    assert quotas.throttle_ms(PRODUCE, ANONYMOUS, 1000) == 0  # the burst: one second's worth
    assert quotas.throttle_ms(PRODUCE, ANONYMOUS, 500) == 500
    assert quotas.throttle_ms(FETCH, ANONYMOUS, 10**6) == 0  # no fetch quota
    assert quotas.throttle_ms(PRODUCE, "User:other", 1000) == 0  # per principal
    clock.advance(0.5)
    assert quotas.throttle_ms(PRODUCE, ANONYMOUS, 0) == 0
    assert quotas.throttle_ms(PRODUCE, ANONYMOUS, 10**9) == MAX_THROTTLE_MS


async def test_etcd_overrides_replace_the_default_and_zero_is_unlimited() -> None:
    store = MemoryMetadataStore()
    overrides = QuotaOverrides(store, KS)
    clock = FakeClock()
    quotas = KafkaQuotas(overrides, fetch_bytes_per_s=1000, clock=clock)
    await quotas.start()
    try:
        writer = QuotaStore(store, KS)
        await overrides.wait_for_revision(
            await writer.put("User:alice", QuotaConfig(fetch_bytes_per_s=100))
        )
        await overrides.wait_for_revision(
            await writer.put("User:bob", QuotaConfig(fetch_bytes_per_s=0))
        )
        assert quotas.throttle_ms(FETCH, "User:alice", 300) == 2000
        assert quotas.throttle_ms(FETCH, "User:bob", 10**9) == 0
        assert quotas.throttle_ms(FETCH, "User:carol", 1500) == 500  # the default
        await overrides.wait_for_revision(await writer.delete("User:alice"))
        assert quotas.rate(FETCH, "User:alice") == 1000
    finally:
        await quotas.stop()
        await store.aclose()


async def test_an_answer_is_held_for_its_throttle_time() -> None:
    clock = FakeClock()
    quotas = KafkaQuotas(None, clock=clock)
    held = asyncio.create_task(quotas.hold(250))
    await asyncio.sleep(0)
    clock.advance(0.2)
    await asyncio.sleep(0)
    assert not held.done()
    clock.advance(0.05)
    await held


@pytest.fixture
async def limited(tmp_path: Path) -> AsyncIterator[BrokerHarness]:
    store = MemoryMetadataStore()
    settings = BrokerSettings(
        data_dir=tmp_path / "b", quota_produce_bytes_per_s=2000, quota_fetch_bytes_per_s=2000
    )
    app = create_app(settings, store_factory=lambda _url: store)
    async with app.router.lifespan_context(app):
        yield BrokerHarness(store, KS, app.state.broker, None, None)  # type: ignore[arg-type]
    await store.aclose()


async def test_produce_and_fetch_answers_carry_and_wait_their_throttle_time(
    limited: BrokerHarness,
) -> None:
    await limited.create_topic("slow")
    kafka = await KafkaTestConnection.open(kafka_port(limited.broker))
    records = batch(b"x" * 2500)  # over the 2,000-byte burst by about 600 bytes: ~300 ms
    started = time.monotonic()
    answer = await kafka.call(0, 7, produce_request("slow", records))
    produced = time.monotonic() - started
    assert answer.responses[0].partition_responses[0].error_code == 0
    throttled = answer.throttle_time.total_seconds()
    assert 0.2 < throttled < 0.4
    assert produced >= throttled - 0.01
    fetched = await kafka.call(1, 11, fetch_request("slow", 0, max_wait_ms=0))
    assert fetched.responses[0].partitions[0].records
    assert 0.2 < fetched.throttle_time.total_seconds() < 0.4
    fetched = await kafka.call(1, 12, fetch12_request("slow", 0))  # the hand-written codec
    assert fetched.throttle_time.total_seconds() > 0.5  # still in debt: two fetches' bytes
    await kafka.close()


async def test_a_users_override_holds_it_to_its_own_rate(tmp_path: Path) -> None:
    async with secured_broker(tmp_path) as secured:
        await secured.harness.create_topic("t")
        await secured.allow(AclBinding("User:alice", ResourceType.TOPIC, "t", Operation.WRITE))
        listener = secured.harness.broker.kafka_listener
        quotas = listener._server_state.quotas  # type: ignore[union-attr]
        assert quotas is not None
        assert quotas.overrides is not None
        revision = await QuotaStore(secured.harness.store, KS).put(
            "User:alice", QuotaConfig(produce_bytes_per_s=1000)
        )
        await quotas.overrides.wait_for_revision(revision)
        alice = await secured.connect("alice")
        answer = await alice.call(0, 7, produce_request("t", batch(b"y" * 1200)))
        assert answer.throttle_time.total_seconds() > 0.1
        admin = await secured.connect("admin")
        answer = await admin.call(0, 7, produce_request("t", batch(b"y" * 1200)))
        assert answer.throttle_time.total_seconds() == 0  # no default: unlimited
        await alice.close()
        await admin.close()
