"""The broker's metrics: record counts from batch headers, counters, the scrape-time collector."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import CommittedOffset
from yak.record import CompressionType, RecordInput, encode_batch
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
    await store.aclose()
