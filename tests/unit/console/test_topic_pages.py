"""The topic and broker pages' pure parts: form checks, partition health, retention, broker rows
(down brokers too)."""

from __future__ import annotations

import pytest

from yak.api.admin import (
    BrokerInfo,
    BrokerLoadInfo,
    BrokerStatus,
    BrokerTopicLogs,
    ClusterInfo,
    PartitionInfo,
    TopicDescription,
    TopicLog,
    TopicLogDirs,
)
from yak.errors import InvalidConfigError, InvalidReplicationFactorError, TopicAlreadyExistsError
from yak_console.pages.brokers import broker_rows
from yak_console.pages.events import metrics_of
from yak_console.pages.topic_forms import (
    NewTopic,
    TopicHealth,
    config_edit,
    field_of,
    format_duration_ms,
    new_topic,
    topic_health,
)
from yak_console.sampler import derive


def test_a_good_form_becomes_a_topic_with_normalised_configs() -> None:
    form = {
        "name": "orders.v1",
        "partitions": "6",
        "replication_factor": "3",
        "retention_ms": " 3600000 ",
        "cleanup_policy": "delete,compact",
        "configs": "# comment\nmin.insync.replicas = 2\n\n",
    }
    assert new_topic(form, live_brokers=3) == NewTopic(
        "orders.v1",
        6,
        3,
        {"min.insync.replicas": "2", "retention.ms": "3600000", "cleanup.policy": "compact,delete"},
    )


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"name": "bad name!"}, "name", "illegal characters"),
        ({"name": ""}, "name", "empty"),
        ({"partitions": "0"}, "partitions", "between 1 and 10,000"),
        ({"partitions": "two"}, "partitions", "whole number"),
        ({"replication_factor": "4"}, "replication_factor", "3 live brokers"),
        ({"retention_ms": "-5"}, "retention_ms", "must be >= -1"),
        ({"cleanup_policy": "forever"}, "cleanup_policy", "subset of compact, delete"),
        ({"configs": "nonsense"}, "configs", "line 1"),
        ({"configs": "retention.hours=3"}, "configs", "Unknown topic config"),
        ({"configs": "min.insync.replicas=3", "replication_factor": "2"}, "configs", "larger"),
    ],
)
def test_each_bad_field_gets_its_own_message(
    changes: dict[str, str], field: str, words: str
) -> None:
    form = {"name": "t", "partitions": "3", "replication_factor": "3", **changes}
    errors = new_topic(form, live_brokers=3)
    assert isinstance(errors, dict)
    assert list(errors) == [field]
    assert words in errors[field]


def test_without_a_broker_count_the_replication_factor_is_left_to_the_api() -> None:
    form = {"name": "t", "partitions": "1", "replication_factor": "5"}
    assert isinstance(new_topic(form, live_brokers=0), NewTopic)


def test_config_edit_sets_changed_values_and_deletes_emptied_overrides() -> None:
    overrides = {"retention.ms": "1000", "cleanup.policy": "compact"}
    form = {"retention.ms": "1000", "cleanup.policy": "", "segment.ms": "60000", "flush.ms": ""}
    assert config_edit(form, overrides) == ({"segment.ms": "60000"}, ["cleanup.policy"], {})
    _, _, errors = config_edit({"retention.ms": "soon"}, overrides)
    assert list(errors) == ["retention.ms"]


def test_api_refusals_land_on_their_field() -> None:
    assert field_of(TopicAlreadyExistsError("exists")) == "name"
    assert field_of(InvalidReplicationFactorError("too many")) == "replication_factor"
    assert field_of(InvalidConfigError("bad", config="retention.ms")) == "retention_ms"
    assert field_of(InvalidConfigError("bad", config="segment.ms")) == "configs"
    assert field_of(InvalidConfigError("bad")) == "configs"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("604800000", "7 d"),
        ("-1", "forever"),
        ("5400000", "1.5 h"),
        (90_000, "1.5 min"),
        ("1000", "1 s"),
        ("250", "250 ms"),
        (None, "-"),
        ("soon", "soon"),
    ],
)
def test_durations_read_like_people_write_them(value: str | int | None, shown: str) -> None:
    assert format_duration_ms(value) == shown


def _partition(p: int, leader: int, replicas: list[int], isr: list[int]) -> PartitionInfo:
    return PartitionInfo(
        partition=p, leader=leader, leader_epoch=1, partition_epoch=1, replicas=replicas, isr=isr
    )


def test_health_counts_offline_and_under_replicated_partitions() -> None:
    topic = TopicDescription(
        name="t",
        topic_id="id",
        partition_count=3,
        replication_factor=3,
        configs={},
        partitions=[
            _partition(0, 1, [1, 2, 3], [1, 2, 3]),
            _partition(1, 2, [2, 3, 1], [2, 3]),
            _partition(2, -1, [3, 1, 2], []),
        ],
    )
    assert topic_health(topic) == TopicHealth(under_replicated=2, offline=1)
    assert not topic_health(topic).ok


def _topic(name: str, *, replicas: int, leaders: int) -> TopicLog:
    return TopicLog(
        topic=name,
        replicas=replicas,
        leaders=leaders,
        size_bytes=10 * replicas,
        leader_size_bytes=10 * leaders,
        records=5 * leaders,
        high_watermark_sum=5 * leaders,
    )


def test_a_broker_that_left_is_a_down_row_with_its_last_seen_time() -> None:
    cluster = ClusterInfo(
        cluster_id="c",
        coordinator_id="k",
        controller=None,
        brokers=[
            BrokerInfo(broker_id=1, host="h", port=1, last_seen_ms=900),
            BrokerInfo(broker_id=2, host="h", port=2, status=BrokerStatus.DOWN, last_seen_ms=7),
        ],
        topic_count=0,
        partition_count=0,
        offline_partition_count=0,
    )
    # The log dirs list live brokers only: the down one has none, and is not "unreachable".
    dirs = TopicLogDirs(brokers=[BrokerTopicLogs(broker_id=1)])
    sample = derive(None, 1, 1.0, cluster, dirs, {})
    rows = broker_rows(sample)
    assert [(r.broker_id, r.status, r.last_seen_ms, r.address) for r in rows] == [
        (1, "up", 900, "h:1"),
        (2, "down", 7, "h:2"),
    ]
    assert sample.live_brokers == 1
    assert metrics_of(sample)["brokers"] == 1


def test_broker_rows_join_registrations_and_log_dirs() -> None:
    cluster = ClusterInfo(
        cluster_id="c",
        coordinator_id="k",
        controller=None,
        brokers=[
            BrokerInfo(broker_id=1, host="h", port=1, rack="r1"),
            BrokerInfo(broker_id=2, host="h", port=2, shutting_down=True),
            BrokerInfo(broker_id=3, host="h", port=3),
        ],
        topic_count=1,
        partition_count=2,
        offline_partition_count=0,
    )
    dirs = TopicLogDirs(
        brokers=[
            BrokerTopicLogs(
                broker_id=1,
                disk_total_bytes=400,
                disk_free_bytes=100,
                size_bytes=20,
                replicas=2,
                leaders=1,
                topics=[_topic("t", replicas=2, leaders=1)],
            ),
            BrokerTopicLogs(
                broker_id=2, replicas=1, leaders=1, topics=[_topic("t", replicas=1, leaders=1)]
            ),
            BrokerTopicLogs(broker_id=3, error="timed out"),
        ]
    )
    rows = broker_rows(derive(None, 1, 1.0, cluster, dirs, {}))
    assert [(r.broker_id, r.status, r.led, r.followed) for r in rows] == [
        (1, "up", 1, 1),
        (2, "shutting down", 1, 0),
        (3, "unreachable", 0, 0),
    ]
    assert (rows[0].address, rows[0].disk_used_bytes, rows[0].disk_used_percent) == (
        "h:1",
        300,
        75.0,
    )


def test_broker_rows_carry_each_brokers_load_sample() -> None:
    load = BrokerLoadInfo(
        cpu=0.42,
        memory_bytes=300 << 20,
        disk_used_ratio=0.61,
        records_per_second=1_234.5,
        sampled_at_ms=1_000,
        publish_interval_ms=5_000,
        stale=True,
    )
    cluster = ClusterInfo(
        cluster_id="c",
        coordinator_id="k",
        controller=None,
        brokers=[
            BrokerInfo(broker_id=1, host="h", port=1, load=load),
            BrokerInfo(broker_id=2, host="h", port=2),
        ],
        topic_count=0,
        partition_count=0,
        offline_partition_count=0,
    )
    rows = broker_rows(derive(None, 1, 1.0, cluster, TopicLogDirs(brokers=[]), {}))
    assert rows[0].load == load
    assert rows[1].load is None  # none published yet (or an older proxy)
