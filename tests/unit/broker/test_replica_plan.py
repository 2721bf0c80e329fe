"""Tests for replica_plan: which replicas a broker hosts and which local logs it deletes."""

from __future__ import annotations

from yak.metadata.cache import ClusterSnapshot
from yak.metadata.models import PartitionState, TopicRecord
from yak_broker.replication.replica_plan import log_config_of, min_insync_replicas_of, plan_replicas
from yak_broker.storage.log_config import FlushMode, LogConfig
from yak_broker.storage.log_manager import TopicPartition


def topic(name: str, topic_id: str, partitions: int = 2, **fields: object) -> TopicRecord:
    return TopicRecord(
        name=name,
        topic_id=topic_id,
        partitions=partitions,
        replication_factor=2,
        created_at_ms=0,
        **fields,  # type: ignore[arg-type]
    )


def state(name: str, p: int, replicas: tuple[int, ...], leader: int = -1) -> PartitionState:
    return PartitionState(topic=name, partition=p, leader=leader, replicas=replicas, isr=replicas)


def snapshot(topics: list[TopicRecord], states: list[PartitionState]) -> ClusterSnapshot:
    return ClusterSnapshot(
        revision=1,
        topics={t.name: t for t in topics},
        partitions={(s.topic, s.partition): s for s in states},
    )


def test_hosts_the_partitions_whose_replicas_include_the_broker() -> None:
    snap = snapshot(
        [topic("orders", "id-1", configs={"segment.bytes": "4096"})],
        [state("orders", 0, (1, 2), leader=1), state("orders", 1, (2, 3))],
    )
    plan = plan_replicas(snap, 1, {})
    assert [d.tp for d in plan.host] == [TopicPartition("orders", 0)]
    (desired,) = plan.host
    assert desired.topic_id == "id-1"
    assert desired.config.segment_bytes == 4096
    assert desired.state.leader == 1
    assert plan.delete == ()


def test_deletes_logs_of_gone_deleting_recreated_and_reassigned_topics() -> None:
    snap = snapshot(
        [
            topic("deleting", "id-d", deleting=True),
            topic("recreated", "id-new"),
            topic("moved", "id-m"),
            topic("kept", "id-k"),
            topic("creating", "id-c"),
        ],
        [
            state("deleting", 0, (1,)),
            state("recreated", 0, (1,)),
            state("moved", 0, (2, 3)),
            state("kept", 0, (1,)),
        ],
    )
    local: dict[TopicPartition, str | None] = {
        TopicPartition("gone", 0): "id-g",
        TopicPartition("deleting", 0): "id-d",
        TopicPartition("recreated", 0): "id-old",
        TopicPartition("moved", 0): "id-m",
        TopicPartition("kept", 0): "id-k",
        TopicPartition("creating", 0): "id-c",  # partition key not written yet: leave it
        TopicPartition("legacy", 0): None,
    }
    plan = plan_replicas(snap, 1, local)
    deleted = {tp.topic: reason for tp, reason in plan.delete}
    assert set(deleted) == {"gone", "deleting", "recreated", "moved", "legacy"}
    assert "id-old" in deleted["recreated"]
    assert "no longer include broker 1" in deleted["moved"]
    assert [d.tp.topic for d in plan.host] == ["kept", "recreated"]


def test_a_folder_without_a_topic_id_is_adopted() -> None:
    snap = snapshot([topic("old", "id-1")], [state("old", 0, (1,))])
    plan = plan_replicas(snap, 1, {TopicPartition("old", 0): None})
    assert plan.delete == ()
    assert [d.tp for d in plan.host] == [TopicPartition("old", 0)]


def test_topic_configs_map_to_log_config() -> None:
    configs = {"flush.mode": "sync", "min.insync.replicas": "2", "retention.ms": "1000"}
    config = log_config_of(configs)
    assert (config.flush_mode, config.retention_ms) == (FlushMode.SYNC, 1000)
    assert min_insync_replicas_of(configs) == 2
    assert min_insync_replicas_of({}) == 1
    assert log_config_of({"segment.bytes": "not a number"}) == LogConfig()
