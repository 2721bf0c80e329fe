"""The proxy's keyless-record partitioners: chosen by setting or per request, and the
load-aware one reading leaders and load samples from the metadata cache."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from tests.unit.rest_proxy.inprocess import proxy_and_broker
from yak.clock import FakeClock
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerLoad, BrokerRegistration, PartitionState
from yak.partitioner import (
    NO_LEADER,
    LoadAwarePartitioner,
    RoundRobinPartitioner,
    StickyPartitioner,
)
from yak_rest_proxy.produce.partitioners import Partitioners, SnapshotLoad
from yak_rest_proxy.settings import ProxySettings

KEYS = Keyspace("local")


def registration(broker_id: int, cpu: float, now_ms: int) -> BrokerRegistration:
    load = BrokerLoad(
        cpu=cpu,
        memory_bytes=100 << 20,
        disk_used_ratio=0.5,
        records_per_second=cpu * 10_000,
        sampled_at_ms=now_ms,
    )
    return BrokerRegistration(
        broker_id=broker_id, host="127.0.0.1", port=9000 + broker_id, started_at_ms=0, load=load
    )


async def test_snapshot_load_steers_keyless_records_away_from_the_loaded_leader() -> None:
    store, clock = MemoryMetadataStore(), FakeClock()
    now = clock.time_ms()
    for broker_id, cpu in ((0, 1.8), (1, 0.2), (2, 0.2)):
        await store.put(KEYS.broker(broker_id), registration(broker_id, cpu, now).encode())
    for partition in range(6):  # leaders 0, 1, 2, 0, 1, 2; partition 6 has none
        state = PartitionState(
            topic="t", partition=partition, leader=partition % 3, replicas=(0, 1, 2), isr=(0,)
        )
        await store.put(KEYS.partition("t", partition), state.encode())
    cache = MetadataCache(store, KEYS)
    await cache.start()
    view = SnapshotLoad(cache, clock)
    assert list(view.leaders("t", 7)) == [0, 1, 2, 0, 1, 2, NO_LEADER]
    loads = view.loads()
    assert loads[0] is not None
    assert loads[0].cpu == 1.8
    partitioner = LoadAwarePartitioner(view, batch_bytes=1, rng=random.Random(4))
    led = Counter(partitioner.partition("t", None, 7, 1) % 3 for _ in range(3_000))
    assert led[0] < 300  # round robin: 1,000 (and the leaderless partition 6: none)
    clock.advance(3 * 5 + 0.001)  # every sample stale: each leader counts as average
    led = Counter(partitioner.partition("t", None, 6, 1) % 3 for _ in range(3_000))
    assert min(led.values()) > 850
    await cache.stop()
    await store.aclose()


def test_the_partitioners_by_name() -> None:
    cache = MetadataCache(MemoryMetadataStore(), KEYS)
    partitioners = Partitioners(cache, FakeClock())
    assert isinstance(partitioners.get("sticky"), StickyPartitioner)
    assert isinstance(partitioners.get("round_robin"), RoundRobinPartitioner)
    assert isinstance(partitioners.get("load_aware"), LoadAwarePartitioner)
    assert partitioners.get("load_aware") is partitioners.get("load_aware")  # state kept


def test_the_setting_names_a_known_partitioner() -> None:
    settings = ProxySettings.from_env({"YAK_PARTITIONER": "load_aware"})
    assert settings.partitioner == "load_aware"
    assert ProxySettings().partitioner == "sticky"
    with pytest.raises(ValueError, match="unknown partitioner 'busy'"):
        ProxySettings.from_env({"YAK_PARTITIONER": "busy"})


async def test_a_native_produce_may_name_its_partitioner(tmp_path: Path) -> None:
    async with proxy_and_broker(tmp_path, ProxySettings(partitioner="round_robin")) as (
        client,
        app,
    ):
        assert isinstance(app.state.runtime.partitioner, RoundRobinPartitioner)
        body = {"records": [{"value": "a"}, {"value": "b"}]}
        for name in ("load_aware", "sticky", "round_robin"):
            answer = await client.post(f"/api/v1/topics/t/records?partitioner={name}", json=body)
            assert answer.status_code == 200
            assert [r["partition"] for r in answer.json()["results"]] == [0, 0]
        refused = await client.post("/api/v1/topics/t/records?partitioner=busiest", json=body)
        assert refused.status_code in (400, 422)
        assert "partitioner" in refused.text
