"""The broker's metrics: what Kafka operators watch on a broker, in Prometheus' terms.

Counted on the request path, once per partition of a request (never per record):

- ``BrokerTopicStats`` (Kafka's class of the same name): bytes and records appended by
  producers (``yak_broker_topic_bytes_in_total``, ``..._records_in_total``), fetched by
  consumers (``..._bytes_out_total``, ``..._records_out_total``), and the replication traffic
  apart (``yak_broker_replication_bytes_in_total`` fetched from leaders by this broker as a
  follower, ``..._out_total`` served to followers), per topic; requests by kind
  (``yak_broker_requests_total{request="produce|fetch|replica_fetch"}``); ISR shrinks and
  expands of the partitions this broker leads (``yak_broker_isr_shrinks_total``,
  ``..._expands_total``), counted where the leader learns of the committed change: its own
  AlterIsr write (a lagging follower out, a caught-up one in) or a metadata update (the
  controller took a dead broker out), each change once.

Collected at scrape time from in-memory state (``BrokerCollector``), so nothing is computed on
the hot path: log size, log end offset and high watermark per hosted partition; the number of
partitions, of leaderships, of led partitions under-replicated (ISR smaller than the replica
list) and under ``min.insync.replicas``; and consumer lag (``yak_consumer_group_lag``) of the
partitions led here: high watermark - committed offset, per group. The committed offsets are
read from etcd (one range read of ``offsets/``) before each scrape by ``refresh_offsets``;
each partition has one leader, so summing the brokers' series counts every partition once.

The segment file cache (``storage.file_handles``, ``SegmentFilesCollector``): descriptors of
segment and index files open now (``yak_broker_open_segment_files``), the bound
(``..._max``) and the descriptors closed to make room (``yak_broker_segment_file_evictions``):
a steep eviction rate means the files in use do not fit the bound (``YAK_MAX_OPEN_FILES``).

Records out are counted from the fetched batches' headers (``batch_record_count``: one read of
two header fields per batch, the records are not decoded).

The latency budget (issue 18), observed once per request (never per record or partition), in
seconds, with ``time.perf_counter`` pairs:

- ``yak_broker_produce_stage_seconds{stage}``: ``receive`` (the request's body read and
  decoded, by the transport: ``data_plane``), ``append`` (the local log appends of the
  request's partitions, summed), ``replication`` (acks=all only: from the last append to the
  answer, i.e. until the high watermark covers every partition; in ``flush.mode=sync`` it
  includes the fsync), ``answer`` (the response encoded, by the transport). ``append`` and
  ``replication`` are timed in ``appender.append_partitions``, so every transport gets them.
- ``yak_broker_fetch_stage_seconds{request, stage}``: ``wait`` (time parked in the long poll,
  0 when the first read answered) and ``read`` (the reads of the logs, summed over wake-ups),
  timed in ``delayed_fetch`` for consumer (``fetch``) and follower (``replica_fetch``) fetches.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import NamedTuple, Protocol

import orjson
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from yak.metadata.keyspace import KeyKind, Keyspace
from yak.metadata.store import MetadataStore
from yak.observability.metrics import STAGE_BUCKETS
from yak.protocol.broker_wire import Buffer

__all__ = [
    "BrokerCollector",
    "BrokerTopicStats",
    "ConsumerOffsets",
    "FetchStages",
    "PartitionView",
    "SegmentFilesCollector",
    "batch_record_count",
]


# RecordBatch v2: batchLength (i32) at 8 counts the bytes after offset 12; recordCount at 57.
_LENGTH = struct.Struct(">i")
_LENGTH_AT = 8
_COUNT_AT = 57
_HEADER = 61


def batch_record_count(records: Buffer) -> int:
    """The records in a buffer of whole RecordBatches (a trailing partial batch is ignored)."""
    view = memoryview(records)
    total, position, end = 0, 0, len(view)
    while position + _HEADER <= end:
        (length,) = _LENGTH.unpack_from(view, position + _LENGTH_AT)
        if length < _HEADER - 12 or position + 12 + length > end:
            break
        (count,) = _LENGTH.unpack_from(view, position + _COUNT_AT)
        total += max(count, 0)
        position += 12 + length
    return total


class FetchStages(NamedTuple):
    """The fetch stage histograms of one kind of fetch (consumer or follower)."""

    wait: Histogram
    read: Histogram


class _TopicCounters:
    __slots__ = ("bytes_in", "bytes_out", "records_in", "records_out", "repl_in", "repl_out")

    def __init__(self, stats: BrokerTopicStats, topic: str) -> None:
        self.bytes_in = stats.bytes_in.labels(topic)
        self.records_in = stats.records_in.labels(topic)
        self.bytes_out = stats.bytes_out.labels(topic)
        self.records_out = stats.records_out.labels(topic)
        self.repl_in = stats.replication_bytes_in.labels(topic)
        self.repl_out = stats.replication_bytes_out.labels(topic)


class BrokerTopicStats:
    """Per-topic traffic counters and ISR change counters (see the module doc)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()

        def counter(name: str, doc: str, labels: Iterable[str] = ("topic",)) -> Counter:
            return Counter(name, doc, list(labels), registry=registry)

        self.bytes_in = counter(
            "yak_broker_topic_bytes_in", "Record batch bytes appended by producers (leader)."
        )
        self.records_in = counter(
            "yak_broker_topic_records_in", "Records appended by producers (leader)."
        )
        self.bytes_out = counter(
            "yak_broker_topic_bytes_out", "Record batch bytes returned to consumer fetches."
        )
        self.records_out = counter(
            "yak_broker_topic_records_out", "Records returned to consumer fetches."
        )
        self.replication_bytes_in = counter(
            "yak_broker_replication_bytes_in",
            "Record batch bytes this broker fetched from leaders as a follower.",
        )
        self.replication_bytes_out = counter(
            "yak_broker_replication_bytes_out", "Record batch bytes served to follower fetches."
        )
        requests = counter(
            "yak_broker_requests", "Data-plane requests by kind.", labels=("request",)
        )
        self.produce_requests = requests.labels("produce")
        self.fetch_requests = requests.labels("fetch")
        self.replica_fetch_requests = requests.labels("replica_fetch")
        self.isr_shrinks = Counter(
            "yak_broker_isr_shrinks", "ISR shrinks of partitions led by this broker.",
            registry=registry,
        )  # fmt: skip
        self.isr_expands = Counter(
            "yak_broker_isr_expands", "ISR expansions of partitions led by this broker.",
            registry=registry,
        )  # fmt: skip
        produce = Histogram(
            "yak_broker_produce_stage_seconds",
            "Time of each stage of a produce request at the broker.",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=registry,
        )
        self.produce_receive = produce.labels("receive")
        self.produce_append = produce.labels("append")
        self.produce_replication = produce.labels("replication")
        self.produce_answer = produce.labels("answer")
        fetch = Histogram(
            "yak_broker_fetch_stage_seconds",
            "Time of each stage of a fetch at the broker: parked waiting, reading the logs.",
            ["request", "stage"],
            buckets=STAGE_BUCKETS,
            registry=registry,
        )
        self.fetch_stages = FetchStages(
            fetch.labels("fetch", "wait"), fetch.labels("fetch", "read")
        )
        self.replica_fetch_stages = FetchStages(
            fetch.labels("replica_fetch", "wait"), fetch.labels("replica_fetch", "read")
        )
        self._topics: dict[str, _TopicCounters] = {}

    def topic(self, topic: str) -> _TopicCounters:
        """The counters of ``topic`` (label lookups done once per topic)."""
        counters = self._topics.get(topic)
        if counters is None:
            counters = self._topics[topic] = _TopicCounters(self, topic)
        return counters

    def on_produce(self, topic: str, size: int, records: int) -> None:
        counters = self.topic(topic)
        counters.bytes_in.inc(size)
        counters.records_in.inc(records)

    def on_fetch(self, topic: str, records: Buffer, *, follower: bool) -> None:
        size = len(memoryview(records))
        if not size:
            return
        counters = self.topic(topic)
        if follower:
            counters.repl_out.inc(size)
        else:
            counters.bytes_out.inc(size)
            counters.records_out.inc(batch_record_count(records))

    def on_replica_fetched(self, topic: str, size: int) -> None:
        if size:
            self.topic(topic).repl_in.inc(size)

    def on_isr_change(self, before: tuple[int, ...], after: tuple[int, ...]) -> None:
        if set(after) < set(before):
            self.isr_shrinks.inc()
        elif set(after) > set(before):
            self.isr_expands.inc()


class ConsumerOffsets:
    """The committed offsets of every group, read from etcd before each scrape."""

    def __init__(self, store: Callable[[], MetadataStore | None], keyspace: Keyspace) -> None:
        self._store = store
        self._keyspace = keyspace
        #: (topic, partition) -> {group: committed offset}
        self.by_partition: dict[tuple[str, int], dict[str, int]] = {}

    async def refresh(self) -> None:
        store = self._store()
        if store is None:
            return
        found = await store.range_prefix(self._keyspace.offsets_prefix)
        offsets: dict[tuple[str, int], dict[str, int]] = {}
        for kv in found.kvs:
            parsed = self._keyspace.parse(kv.key)
            if parsed is None or parsed.kind is not KeyKind.COMMITTED_OFFSET:
                continue
            try:
                offset = orjson.loads(kv.value)["offset"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue
            if parsed.topic is None or parsed.partition is None or parsed.group is None:
                continue
            if isinstance(offset, int):
                offsets.setdefault((parsed.topic, parsed.partition), {})[parsed.group] = offset
        self.by_partition = offsets


class PartitionView(NamedTuple):
    """What the collector reads of one hosted replica (``ReplicaManager.partition_views``)."""

    topic: str
    partition: int
    size: int
    log_end_offset: int
    high_watermark: int
    is_leader: bool
    isr: int  # the ISR's size
    replicas: int  # the replica list's size (without replicas being added by a reassignment)
    min_isr: int


class BrokerCollector(Collector):
    """Gauges computed at scrape time from the hosted replicas (see the module doc)."""

    def __init__(
        self,
        broker_id: int,
        partitions: Callable[[], Iterable[PartitionView]],
        offsets: ConsumerOffsets,
        *,
        max_partition_series: int = 1_000,
    ) -> None:
        self._broker = str(broker_id)
        self._partitions = partitions
        self._offsets = offsets
        self._max_partition_series = max_partition_series

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())  # unchecked collector: its series depend on the hosted partitions

    def collect(self) -> Iterator[GaugeMetricFamily]:
        views = list(self._partitions())
        # Per partition only while it stays small: three series per replica at 20,000
        # partitions (60,000 series) cost a scrape half a second of the event loop, and a
        # Prometheus as much again (Redpanda's aggregate_metrics makes the same trade).
        per_partition = len(views) <= self._max_partition_series
        tp = ["topic", "partition"]
        size = GaugeMetricFamily(
            "yak_broker_log_size_bytes", "Bytes on disk of a replica.", labels=tp
        )
        leo = GaugeMetricFamily(
            "yak_broker_log_end_offset", "Log end offset of a replica.", labels=tp
        )
        hw = GaugeMetricFamily(
            "yak_broker_high_watermark", "High watermark of a replica.", labels=tp
        )
        lag = GaugeMetricFamily(
            "yak_consumer_group_lag",
            "High watermark minus the group's committed offset, for partitions led here.",
            labels=["group", "topic", "partition"],
        )
        topic_sizes: dict[str, int] = {}
        topic_lags: dict[tuple[str, str], int] = {}
        hosted = leaders = under_replicated = under_min_isr = 0
        by_partition: Mapping[tuple[str, int], dict[str, int]] = self._offsets.by_partition
        for view in views:
            topic_sizes[view.topic] = topic_sizes.get(view.topic, 0) + view.size
            if per_partition:
                labels = [view.topic, str(view.partition)]
                size.add_metric(labels, view.size)
                leo.add_metric(labels, view.log_end_offset)
                hw.add_metric(labels, view.high_watermark)
            hosted += 1
            if not view.is_leader:
                continue
            leaders += 1
            under_replicated += view.isr < view.replicas
            under_min_isr += view.isr < view.min_isr
            for group, committed in by_partition.get((view.topic, view.partition), {}).items():
                behind = max(view.high_watermark - committed, 0)
                key = (group, view.topic)
                topic_lags[key] = topic_lags.get(key, 0) + behind
                if per_partition:
                    lag.add_metric([group, view.topic, str(view.partition)], behind)
        if per_partition:
            yield size
            yield leo
            yield hw
            yield lag
        topic_size = GaugeMetricFamily(
            "yak_broker_topic_log_size_bytes",
            "Bytes on disk of the replicas of a topic hosted here.",
            labels=["topic"],
        )
        for topic, total in topic_sizes.items():
            topic_size.add_metric([topic], total)
        yield topic_size
        topic_lag = GaugeMetricFamily(
            "yak_consumer_group_topic_lag",
            "The group's lag summed over the topic's partitions led here.",
            labels=["group", "topic"],
        )
        for (group, topic), total in topic_lags.items():
            topic_lag.add_metric([group, topic], total)
        yield topic_lag
        for name, doc, value in (
            ("yak_broker_partitions", "Partition replicas hosted by this broker.", hosted),
            ("yak_broker_leader_partitions", "Partitions this broker leads.", leaders),
            (
                "yak_broker_under_replicated_partitions",
                "Partitions led here whose ISR is smaller than their replica list.",
                under_replicated,
            ),
            (
                "yak_broker_under_min_isr_partitions",
                "Partitions led here whose ISR is smaller than min.insync.replicas.",
                under_min_isr,
            ),
        ):
            yield GaugeMetricFamily(name, doc, value=value)


class FileCacheStats(Protocol):
    """What the collector reads of the broker's ``FileHandleCache``."""

    @property
    def open_count(self) -> int: ...

    @property
    def max_open(self) -> int: ...

    @property
    def evictions(self) -> int: ...


class SegmentFilesCollector(Collector):
    """The segment file cache's size, bound and evictions, read at scrape time."""

    def __init__(self, files: FileCacheStats) -> None:
        self._files = files

    def describe(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        return self.collect()

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        files = self._files
        yield GaugeMetricFamily(
            "yak_broker_open_segment_files",
            "Segment and index file descriptors held open by the broker's file cache.",
            value=files.open_count,
        )
        yield GaugeMetricFamily(
            "yak_broker_open_segment_files_max",
            "Bound of the segment file cache (YAK_MAX_OPEN_FILES).",
            value=files.max_open,
        )
        yield CounterMetricFamily(
            "yak_broker_segment_file_evictions",
            "Segment and index file descriptors closed to make room (reopened on next use).",
            value=files.evictions,
        )
