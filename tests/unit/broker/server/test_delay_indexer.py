"""Tests for yak_broker.server.delay_indexer: which replicas keep a delay index, indexing woken by
appends, checkpoints off the loop, forgetting past buckets, the share-partitions' hook."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from yak.delays import delay_header
from yak.metadata.models import TopicRecord
from yak.metadata.snapshot import ClusterSnapshot
from yak.record import RecordInput, encode_batch
from yak.topic_config import DELAYED_DELIVERY_ENABLE
from yak.types import TopicPartition
from yak_broker.server.delay_indexer import DelayIndexer
from yak_broker.share.index_delay_source import IndexedDelaySource
from yak_broker.storage.delay_index import DelayIndex
from yak_broker.storage.log import Log
from yak_broker.storage.log_config import LogConfig

NOW = 1_767_225_600_000
HOUR = 3_600_000
DELAYED = TopicPartition("delayed", 0)
PLAIN = TopicPartition("plain", 0)


@dataclass
class Replica:
    log: Log


class Cluster:
    """The hosted replicas and the topics' configs, as the broker would hand them over."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.replicas: dict[TopicPartition, Replica] = {}
        self.topics: dict[str, TopicRecord] = {}
        self.now = NOW

    def host(self, tp: TopicPartition, delays: bool) -> Log:
        configs = {DELAYED_DELIVERY_ENABLE: "true"} if delays else {}
        self.topics[tp.topic] = TopicRecord(
            name=tp.topic,
            topic_id="0" * 22,
            partitions=1,
            replication_factor=1,
            configs=configs,
            created_at_ms=0,
        )
        log = Log.open(self.tmp_path / tp.dir_name, LogConfig(segment_bytes=1 << 20))
        self.replicas[tp] = Replica(log)
        return log

    def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot(revision=1, topics=dict(self.topics))

    def indexer(self, **kwargs: int) -> DelayIndexer:
        return DelayIndexer(lambda: self.replicas, self.snapshot, now_ms=lambda: self.now, **kwargs)


def _delayed(*dues: int) -> bytes:
    records = [RecordInput(value=b"v", headers=(delay_header(due),)) for due in dues]
    return encode_batch(records, now_ms=NOW)


async def test_only_replicas_of_topics_with_delays_are_indexed(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    cluster.host(DELAYED, delays=True).append(_delayed(NOW + 5), 0)
    cluster.host(PLAIN, delays=False).append(_delayed(NOW + 5), 0)
    indexer = cluster.indexer()
    await indexer.reconcile()
    assert set(indexer.partitions) == {DELAYED}
    assert (tmp_path / DELAYED.dir_name / "delays").is_dir()
    assert not (tmp_path / PLAIN.dir_name / "delays").exists()
    await indexer.drain()
    assert indexer.partitions[DELAYED].index.pending(0, 10) == [(NOW + 5, 0)]
    await indexer.stop()


async def test_switching_delays_off_detaches_and_on_again_resumes(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    log = cluster.host(DELAYED, delays=True)
    indexer = cluster.indexer()
    await indexer.reconcile()
    log.append(_delayed(NOW + 1), 0)
    await indexer.drain()
    cluster.topics[DELAYED.topic] = cluster.topics[DELAYED.topic].model_copy(update={"configs": {}})
    await indexer.reconcile()
    assert indexer.partitions == {}
    assert log.observer is None
    log.append(_delayed(NOW + 2), 0)  # appended while off: indexed when delays come back
    cluster.topics[DELAYED.topic] = cluster.topics[DELAYED.topic].model_copy(
        update={"configs": {DELAYED_DELIVERY_ENABLE: "true"}}
    )
    await indexer.reconcile()
    await indexer.drain()
    assert indexer.partitions[DELAYED].index.pending(0, 10) == [(NOW + 1, 0), (NOW + 2, 1)]
    await indexer.stop()


async def test_an_append_queues_the_partition_and_wakes_the_indexer(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    log = cluster.host(DELAYED, delays=True)
    indexer = cluster.indexer(read_bytes=1)
    await indexer.reconcile()
    indexer._work.clear()
    log.append(_delayed(NOW + 1), 0)
    log.append(_delayed(NOW + 2), 0)
    assert indexer._work.is_set()
    assert list(indexer._queue) == [DELAYED]
    await indexer.drain()
    assert indexer.partitions[DELAYED].lag == 0
    await indexer.stop()


async def test_the_running_indexer_indexes_and_stops_with_a_checkpoint(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    log = cluster.host(DELAYED, delays=True)
    log.append(_delayed(NOW + 1, NOW + 2), 0)
    indexer = cluster.indexer(checkpoint_interval_ms=3_600_000)
    indexer.start()
    await asyncio.wait_for(_indexed(indexer), 5)
    partition = indexer.partitions[DELAYED]
    await indexer.stop()
    assert partition.done
    assert indexer.partitions == {}
    reopened = DelayIndex.open(tmp_path / DELAYED.dir_name / "delays")
    assert reopened.cursor == 2


async def _indexed(indexer: DelayIndexer) -> None:
    """Wait on the indexer's own change event (set by each open and indexing step)."""
    while DELAYED not in indexer.partitions or indexer.partitions[DELAYED].lag:
        indexer._changed.clear()
        await indexer._changed.wait()


async def test_checkpoints_are_written_off_the_loop_and_survive_a_crash(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    log = cluster.host(DELAYED, delays=True)
    log.append(_delayed(NOW + 1), 0)
    indexer = cluster.indexer()
    await indexer.reconcile()
    await indexer.drain()
    await indexer.checkpoint_all()
    partition = indexer.partitions[DELAYED]
    assert not partition.dirty
    assert not partition.checkpointing
    # A crash: nothing closed; the folder as the checkpoint left it.
    reopened = DelayIndex.open(tmp_path / DELAYED.dir_name / "delays")
    assert reopened.cursor == 1
    assert reopened.pending(0, 10) == [(NOW + 1, 0)]


async def test_past_buckets_are_forgotten_below_the_lowest_watermark(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    log = cluster.host(DELAYED, delays=True)
    log.append(_delayed(NOW - 5 * HOUR, NOW - 3 * HOUR, NOW + HOUR), 0)
    indexer = cluster.indexer(keep_due_ms=HOUR)
    source = indexer.delay_source(DELAYED.topic, DELAYED.partition)
    assert isinstance(source, IndexedDelaySource)
    list(source.due(NOW - 3 * HOUR - HOUR // 2, NOW - 4 * HOUR, 3))  # lagging 3.5 h
    await indexer.checkpoint_all()
    index = indexer.partitions[DELAYED].index
    assert [due for due, _ in index.pending(0, 10)] == [NOW - 3 * HOUR, NOW + HOUR]
    del source  # the share-partition went away: now bounds what is kept
    await indexer.checkpoint_all()
    assert [due for due, _ in index.pending(0, 10)] == [NOW + HOUR]
    await indexer.stop()


async def test_the_share_hook_opens_on_demand_and_is_none_without_delays(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    cluster.host(DELAYED, delays=True).append(_delayed(NOW + 1), 0)
    cluster.host(PLAIN, delays=False)
    indexer = cluster.indexer()
    assert indexer.delay_source(PLAIN.topic, 0) is None
    source = indexer.delay_source(DELAYED.topic, 0)
    assert source is not None
    assert [tuple(e) for e in source.due(0, NOW + 1, 1)] == [(0, NOW + 1)]
    assert DELAYED in indexer.partitions
    await indexer.stop()


async def test_a_deleted_log_drops_its_index(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    log = cluster.host(DELAYED, delays=True)
    indexer = cluster.indexer()
    await indexer.reconcile()
    del cluster.replicas[DELAYED]
    log.delete()
    assert indexer.partitions == {}
    assert indexer._resync  # a reconcile follows
    await indexer.stop()
