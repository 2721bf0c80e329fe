"""Tests for replica_plan: which replicas a broker hosts and which local logs it deletes."""

from __future__ import annotations

from yak.metadata.models import PartitionState, TopicRecord
from yak.metadata.snapshot import ClusterSnapshot
from yak.types import TopicPartition
from yak_broker.replication.state.replica_plan import (
    log_config_of,
    min_insync_replicas_of,
    plan_changes,
    plan_replicas,
)
from yak_broker.storage.log_config import FlushMode, LogConfig


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


def _cluster() -> ClusterSnapshot:
    return snapshot(
        [
            topic("a", "id-a"),
            topic("b", "id-b", configs={"segment.bytes": "8192"}),
            topic("c", "id-c"),
        ],
        [state(t, p, (1, 2)) for t in ("a", "b", "c") for p in (0, 1)],
    )


def test_a_changed_partition_plans_that_partition_only() -> None:
    plan = plan_changes(_cluster(), 1, {}, [("a", 1)], [])
    assert [d.tp for d in plan.host] == [TopicPartition("a", 1)]
    assert plan.considered == frozenset({TopicPartition("a", 1)})
    assert plan.delete == ()


def test_a_changed_topic_plans_its_partitions_and_its_local_logs() -> None:
    local = {
        TopicPartition("b", 0): "id-b",
        TopicPartition("b", 7): "id-b",
        TopicPartition("c", 0): "id-c",
    }
    plan = plan_changes(_cluster(), 1, local, [], ["b"])
    assert [d.tp for d in plan.host] == [TopicPartition("b", 0), TopicPartition("b", 1)]
    assert {d.config.segment_bytes for d in plan.host} == {8192}
    # b-7 is local, with no state and beyond the count: left alone, as a full plan does.
    assert plan.considered == frozenset(TopicPartition("b", p) for p in (0, 1, 7))
    assert plan.delete == ()


def test_a_deleted_topic_deletes_its_local_logs_and_nothing_else() -> None:
    cluster = _cluster()
    gone = ClusterSnapshot(
        revision=2,
        topics={n: t for n, t in cluster.topics.items() if n != "c"},
        partitions={k: v for k, v in cluster.partitions.items() if k[0] != "c"},
    )
    local = {TopicPartition(t, p): f"id-{t}" for t in ("a", "c") for p in (0, 1)}
    plan = plan_changes(gone, 1, local, [("c", 0), ("c", 1)], ["c"])
    assert plan.host == ()
    assert [tp for tp, _ in plan.delete] == [TopicPartition("c", 0), TopicPartition("c", 1)]
    assert all(reason == "the topic does not exist" for _, reason in plan.delete)


def test_the_changes_plan_agrees_with_the_full_plan_on_what_it_considers() -> None:
    cluster = _cluster()
    local = {TopicPartition("a", 0): "id-old", TopicPartition("b", 1): "id-b"}
    full = plan_replicas(cluster, 1, local)
    changes = plan_changes(cluster, 1, local, [("a", 0), ("c", 1)], ["b"])
    assert changes.considered is not None
    assert changes.host == tuple(d for d in full.host if d.tp in changes.considered)
    assert changes.delete == tuple(x for x in full.delete if x[0] in changes.considered)


def test_log_configs_are_parsed_once_per_distinct_setting() -> None:
    first = log_config_of({"segment.bytes": "16384", "min.insync.replicas": "2"})
    again = log_config_of({"min.insync.replicas": "3", "segment.bytes": "16384"})
    assert first is again  # the same storage settings: one parsed LogConfig
    assert log_config_of({"segment.bytes": "32768"}) is not first
