"""The broker's metrics: record counts from batch headers, counters, the scrape-time collector."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from tests.unit.broker.broker_harness import BrokerHarness
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import CommittedOffset
from yak.record import CompressionType, RecordInput, encode_batch
from yak.types import TopicPartition
from yak_broker.metrics import (
    BrokerCollector,
    BrokerTopicStats,
    ConsumerOffsets,
    PartitionView,
    batch_record_count,
)


def _batch(count: int, compression: CompressionType = CompressionType.NONE) -> bytes:
    records = [RecordInput(value=b"v" * 100) for _ in range(count)]
    return bytes(encode_batch(records, compression=compression))


def test_records_are_counted_from_the_batch_headers() -> None:
    data = _batch(3) + _batch(5, CompressionType.ZSTD) + _batch(1)
    assert batch_record_count(data) == 9
    assert batch_record_count(memoryview(data)[: len(data) - 10]) == 8  # a partial last batch
    assert batch_record_count(b"") == 0
    assert batch_record_count(b"\x00" * 30) == 0


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_traffic_is_counted_per_topic_and_replication_apart() -> None:
    registry = CollectorRegistry()
    stats = BrokerTopicStats(registry)
    stats.on_produce("t", 1000, 7)
    stats.on_produce("t", 24, 1)
    batch = _batch(4)
    stats.on_fetch("t", batch, follower=False)
    stats.on_fetch("t", batch, follower=True)
    stats.on_fetch("u", b"", follower=False)
    stats.on_replica_fetched("t", 300)
    assert _value(registry, "yak_broker_topic_bytes_in_total", topic="t") == 1024
    assert _value(registry, "yak_broker_topic_records_in_total", topic="t") == 8
    assert _value(registry, "yak_broker_topic_bytes_out_total", topic="t") == len(batch)
    assert _value(registry, "yak_broker_topic_records_out_total", topic="t") == 4
    assert _value(registry, "yak_broker_replication_bytes_out_total", topic="t") == len(batch)
    assert _value(registry, "yak_broker_replication_bytes_in_total", topic="t") == 300
    assert registry.get_sample_value("yak_broker_topic_bytes_out_total", {"topic": "u"}) is None


def test_isr_changes_count_as_shrinks_or_expands() -> None:
    registry = CollectorRegistry()
    stats = BrokerTopicStats(registry)
    stats.on_isr_change((0, 1, 2), (0, 1))
    stats.on_isr_change((0, 1), (0, 1, 2))
    stats.on_isr_change((0, 1), (1, 0))
    assert _value(registry, "yak_broker_isr_shrinks_total") == 1
    assert _value(registry, "yak_broker_isr_expands_total") == 1


async def test_the_collector_reports_partitions_health_and_consumer_lag() -> None:
    store = MemoryMetadataStore()
    keyspace = Keyspace("c1")
    for group, offset in (("billing", 40), ("audit", 100)):
        value = CommittedOffset(offset=offset, commit_time_ms=1).encode()
        await store.put(keyspace.committed_offset(group, "t", 0), value)
    await store.put(keyspace.committed_offset("billing", "t", 1), b"not json")
    views = [
        PartitionView("t", 0, 4096, 120, 100, True, isr=2, replicas=3, min_isr=2),
        PartitionView("t", 1, 10, 5, 5, True, isr=1, replicas=3, min_isr=2),
        PartitionView("t", 2, 99, 7, 7, False, isr=3, replicas=3, min_isr=2),
    ]
    offsets = ConsumerOffsets(lambda: store, keyspace)
    await offsets.refresh()
    registry = CollectorRegistry()
    registry.register(BrokerCollector(0, lambda: views, offsets))
    assert _value(registry, "yak_broker_log_size_bytes", topic="t", partition="0") == 4096
    assert _value(registry, "yak_broker_log_end_offset", topic="t", partition="0") == 120
    assert _value(registry, "yak_broker_high_watermark", topic="t", partition="0") == 100
    assert _value(registry, "yak_broker_log_size_bytes", topic="t", partition="2") == 99
    assert _value(registry, "yak_broker_partitions") == 3
    assert _value(registry, "yak_broker_leader_partitions") == 2
    assert _value(registry, "yak_broker_under_replicated_partitions") == 2
    assert _value(registry, "yak_broker_under_min_isr_partitions") == 1
    lag = "yak_consumer_group_lag"
    assert _value(registry, lag, group="billing", topic="t", partition="0") == 60
    assert _value(registry, lag, group="audit", topic="t", partition="0") == 0
    assert (
        registry.get_sample_value(lag, {"group": "billing", "topic": "t", "partition": "1"}) is None
    )
    assert _value(registry, "yak_broker_topic_log_size_bytes", topic="t") == 4096 + 10 + 99
    assert _value(registry, "yak_consumer_group_topic_lag", group="billing", topic="t") == 60
    await store.aclose()


async def test_past_the_bound_a_broker_reports_per_topic_only() -> None:
    """More replicas than ``max_partition_series``: no per-partition series, the same totals
    per topic, and the counts unchanged."""
    store = MemoryMetadataStore()
    keyspace = Keyspace("c1")
    for partition, offset in ((0, 10), (1, 20)):
        value = CommittedOffset(offset=offset, commit_time_ms=1).encode()
        await store.put(keyspace.committed_offset("g", "t", partition), value)
    views = [
        PartitionView("t", 0, 100, 50, 50, True, isr=3, replicas=3, min_isr=2),
        PartitionView("t", 1, 200, 70, 70, True, isr=2, replicas=3, min_isr=2),
        PartitionView("u", 0, 300, 9, 9, False, isr=3, replicas=3, min_isr=2),
    ]
    offsets = ConsumerOffsets(lambda: store, keyspace)
    await offsets.refresh()
    registry = CollectorRegistry()
    registry.register(BrokerCollector(0, lambda: views, offsets, max_partition_series=2))
    for name in ("yak_broker_log_size_bytes", "yak_broker_log_end_offset"):
        assert registry.get_sample_value(name, {"topic": "t", "partition": "0"}) is None
    lag = {"group": "g", "topic": "t", "partition": "0"}
    assert registry.get_sample_value("yak_consumer_group_lag", lag) is None
    assert _value(registry, "yak_broker_topic_log_size_bytes", topic="t") == 300
    assert _value(registry, "yak_broker_topic_log_size_bytes", topic="u") == 300
    assert _value(registry, "yak_consumer_group_topic_lag", group="g", topic="t") == 40 + 50
    assert _value(registry, "yak_broker_partitions") == 3
    assert _value(registry, "yak_broker_under_replicated_partitions") == 1
    await store.aclose()


def _stage_counts(registry: CollectorRegistry, name: str, **labels: str) -> dict[str, float]:
    """How many observations each stage of ``name`` holds."""
    stages = {
        "yak_broker_produce_stage_seconds": ("receive", "append", "replication", "answer"),
        "yak_broker_fetch_stage_seconds": ("wait", "read"),
    }[name]
    return {s: _value(registry, f"{name}_count", stage=s, **labels) for s in stages}


async def test_a_produce_observes_each_stage_once(broker_on_each_transport: BrokerHarness) -> None:
    broker = broker_on_each_transport
    await broker.create_topic("stages")
    registry = broker.broker.metrics.registry
    produce = "yak_broker_produce_stage_seconds"
    await broker.client.produce_one("stages", 0, _batch(3), acks=-1)
    assert _stage_counts(registry, produce) == {
        "receive": 1,
        "append": 1,
        "replication": 1,
        "answer": 1,
    }
    await broker.client.produce_one("stages", 0, _batch(3), acks=1)  # no replication wait
    assert _stage_counts(registry, produce) == {
        "receive": 2,
        "append": 2,
        "replication": 1,
        "answer": 2,
    }
    assert _value(registry, f"{produce}_sum", stage="append") > 0


async def test_a_fetch_observes_its_wait_and_its_reads_once(
    broker_on_each_transport: BrokerHarness,
) -> None:
    broker = broker_on_each_transport
    await broker.create_topic("waits")
    registry = broker.broker.metrics.registry
    fetch = "yak_broker_fetch_stage_seconds"
    await broker.client.produce_one("waits", 0, _batch(1), acks=1)
    await broker.client.fetch_one("waits", 0, 0, max_wait_ms=0)  # answered by its first read
    assert _stage_counts(registry, fetch, request="fetch") == {"wait": 1, "read": 1}
    assert _value(registry, f"{fetch}_sum", request="fetch", stage="wait") == 0

    tp = TopicPartition("waits", 0)
    parked = asyncio.create_task(broker.client.fetch_one("waits", 0, 1, max_wait_ms=30_000))
    for _ in range(100):  # let the fetch reach its wait (a few event-loop turns)
        if broker.broker.waiters.waiting(tp):
            break
        await asyncio.sleep(0)
    assert broker.broker.waiters.waiting(tp) == 1
    await broker.client.produce_one("waits", 0, _batch(1), acks=1)
    await asyncio.wait_for(parked, 5)
    assert _stage_counts(registry, fetch, request="fetch") == {"wait": 2, "read": 2}
    assert _value(registry, f"{fetch}_sum", request="fetch", stage="wait") > 0
    assert _stage_counts(registry, fetch, request="replica_fetch") == {"wait": 0, "read": 0}
