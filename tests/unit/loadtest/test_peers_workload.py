"""Workload YAML files: the bundled ones load, and every malformed one is refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.peers.workload import (
    KeyDistributor,
    Workload,
    WorkloadError,
    bundled_workloads,
    load_workload,
    parse_workload,
)


def test_the_bundled_workloads_cover_the_issue() -> None:
    workloads = bundled_workloads()
    headline = workloads["1-topic-16-partitions-1kb"]
    assert (headline.partitions_per_topic, headline.message_size) == (16, 1024)
    assert headline.max_rate
    assert workloads["1-topic-16-partitions-1kb-10k-rate"].producer_rate == 10_000
    assert workloads["1-topic-16-partitions-100b"].message_size == 100
    assert workloads["1-topic-16-partitions-1kb-4-subscriptions"].subscriptions_per_topic == 4
    backlog = workloads["1-topic-16-partitions-1kb-backlog-1m"]
    assert backlog.backlog_records == 1_000_000
    assert not backlog.max_rate


def test_a_file_with_every_key(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(
        "name: w\ntopics: 2\npartitions_per_topic: 4\nmessage_size: 100\n"
        "key_distributor: KEY_ROUND_ROBIN\nproducers_per_topic: 2\nsubscriptions_per_topic: 3\n"
        "consumers_per_subscription: 2\nproducer_rate: 500\nduration_s: 12.5\nwarmup_s: 0\n"
    )
    assert load_workload(path) == Workload(
        name="w",
        topics=2,
        partitions_per_topic=4,
        message_size=100,
        key_distributor=KeyDistributor.KEY_ROUND_ROBIN,
        producers_per_topic=2,
        subscriptions_per_topic=3,
        consumers_per_subscription=2,
        producer_rate=500,
        duration_s=12.5,
        warmup_s=0.0,
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "a workload is a mapping"),
        ({"topics": 1}, "'name' must be a non-empty string"),
        ({"name": "w", "partitions": 3}, "unknown key(s) partitions"),
        ({"name": "w", "topics": 0}, "'topics' must be at least 1"),
        ({"name": "w", "topics": True}, "'topics' must be an integer"),
        ({"name": "w", "producer_rate": 1.5}, "'producer_rate' must be an integer"),
        ({"name": "w", "duration_s": "10s"}, "'duration_s' must be a number"),
        ({"name": "w", "message_size": 10}, "'message_size' must be at least 48"),
        ({"name": "w", "message_size": 10**7}, "'message_size' is over"),
        ({"name": "w", "key_distributor": "ZIPF"}, "must be one of NO_KEY"),
        ({"name": "w", "backlog_records": 5, "producer_rate": 5}, "no rate"),
    ],
)
def test_malformed_workloads_are_refused(data: object, message: str) -> None:
    with pytest.raises(WorkloadError, match=r"^bad\.yaml: ") as raised:
        parse_workload(data, "bad.yaml")
    assert message in str(raised.value)


def test_invalid_yaml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(WorkloadError, match=r"broken\.yaml: not valid YAML"):
        load_workload(path)


def test_scaled_shrinks_durations_and_backlog_with_floors() -> None:
    workload = Workload("w", duration_s=30, warmup_s=10, backlog_records=1_000_000)
    quick = workload.scaled(0.1)
    assert (quick.duration_s, quick.warmup_s, quick.backlog_records) == (3.0, 1.0, 100_000)
    tiny = workload.scaled(0.0001)
    assert (tiny.duration_s, tiny.warmup_s, tiny.backlog_records) == (3.0, 1.0, 1_000)
    assert workload.scaled(1) is workload
    assert Workload("w").scaled(0.5).backlog_records == 0
