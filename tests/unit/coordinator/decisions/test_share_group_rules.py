"""The share-group admin rules: settings bounds, dead-letter topics, reserved names, the state
topic's shape."""

from __future__ import annotations

import pytest

from yak.errors import (
    InvalidConfigError,
    InvalidGroupIdError,
    InvalidTopicError,
    UnknownTopicOrPartitionError,
)
from yak.metadata.models import ShareGroupRecord, ShareOffsetReset, TopicRecord
from yak.metadata.snapshot import ClusterSnapshot
from yak_broker.share.state_store import SHARE_STATE_TOPIC as BROKER_STATE_TOPIC
from yak_coordinator.decisions.share_group_rules import (
    DELIVERY_ATTEMPTS_RANGE,
    LOCK_DURATION_RANGE_MS,
    SHARE_STATE_TOPIC,
    ShareGroupChanges,
    ShareGroupSettings,
    altered_share_group,
    check_user_topic_name,
    new_share_group,
    settings_of,
    state_topic_spec,
)


def _topic(name: str, *, deleting: bool = False) -> TopicRecord:
    return TopicRecord(
        name=name,
        topic_id="id-" + name,
        partitions=1,
        replication_factor=1,
        created_at_ms=1,
        deleting=deleting,
    )


SNAPSHOT = ClusterSnapshot(
    revision=1,
    topics={"dlq": _topic("dlq"), "gone": _topic("gone", deleting=True)},
)


def test_the_state_topic_is_the_one_the_brokers_write() -> None:
    assert SHARE_STATE_TOPIC == BROKER_STATE_TOPIC


def test_a_new_group_has_kafkas_defaults() -> None:
    record = new_share_group("orders", ShareGroupSettings(), SNAPSHOT, 1234)
    assert record == ShareGroupRecord(name="orders", created_at_ms=1234)
    assert settings_of(record) == ShareGroupSettings()


@pytest.mark.parametrize(
    ("settings", "setting", "bounds"),
    [
        (ShareGroupSettings(max_delivery_attempts=0), "max_delivery_attempts", (1, 100)),
        (ShareGroupSettings(max_delivery_attempts=101), "max_delivery_attempts", (1, 100)),
        (ShareGroupSettings(lock_duration_ms=999), "lock_duration_ms", (1_000, 3_600_000)),
        (ShareGroupSettings(lock_duration_ms=3_600_001), "lock_duration_ms", (1_000, 3_600_000)),
    ],
)
def test_settings_out_of_range_name_their_bounds(
    settings: ShareGroupSettings, setting: str, bounds: tuple[int, int]
) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        new_share_group("g", settings, SNAPSHOT, 0)
    assert caught.value.details["config"] == setting
    assert (caught.value.details["min"], caught.value.details["max"]) == bounds
    assert f"between {bounds[0]} and {bounds[1]}" in caught.value.message


def test_the_bounds_are_accepted_and_agree_with_the_record() -> None:
    for attempts in DELIVERY_ATTEMPTS_RANGE:
        for lock in LOCK_DURATION_RANGE_MS:
            settings = ShareGroupSettings(max_delivery_attempts=attempts, lock_duration_ms=lock)
            record = new_share_group("g", settings, SNAPSHOT, 0)
            # The stored model checks the same bounds: a decoded record round-trips.
            assert ShareGroupRecord.decode(record.encode()) == record


@pytest.mark.parametrize("name", ["", "a b", ".", "x" * 250])
def test_bad_group_names(name: str) -> None:
    with pytest.raises(InvalidGroupIdError):
        new_share_group(name, ShareGroupSettings(), SNAPSHOT, 0)


def test_dead_letter_topic_must_exist() -> None:
    record = new_share_group("g", ShareGroupSettings(dead_letter_topic="dlq"), SNAPSHOT, 0)
    assert record.dead_letter_topic == "dlq"
    for missing in ("nope", "gone"):
        with pytest.raises(UnknownTopicOrPartitionError):
            new_share_group("g", ShareGroupSettings(dead_letter_topic=missing), SNAPSHOT, 0)


@pytest.mark.parametrize("topic", [SHARE_STATE_TOPIC, "__yak_other", "bad name"])
def test_dead_letter_topic_cannot_be_internal_or_illegal(topic: str) -> None:
    snapshot = ClusterSnapshot(revision=1, topics={SHARE_STATE_TOPIC: _topic(SHARE_STATE_TOPIC)})
    with pytest.raises(InvalidTopicError):
        new_share_group("g", ShareGroupSettings(dead_letter_topic=topic), snapshot, 0)


def test_changes_keep_what_they_do_not_name() -> None:
    record = new_share_group(
        "g", ShareGroupSettings(dead_letter_topic="dlq", lock_duration_ms=5_000), SNAPSHOT, 7
    )
    altered = altered_share_group(
        record, ShareGroupChanges(max_delivery_attempts=9).applied_to(settings_of(record)), SNAPSHOT
    )
    assert (altered.name, altered.created_at_ms) == ("g", 7)
    assert settings_of(altered) == ShareGroupSettings(
        dead_letter_topic="dlq", max_delivery_attempts=9, lock_duration_ms=5_000
    )
    earliest = ShareOffsetReset.EARLIEST
    cleared = ShareGroupChanges(clear_dead_letter_topic=True, offset_reset=earliest)
    assert cleared.applied_to(settings_of(altered)) == ShareGroupSettings(
        max_delivery_attempts=9, lock_duration_ms=5_000, offset_reset=ShareOffsetReset.EARLIEST
    )
    with pytest.raises(InvalidConfigError):
        altered_share_group(record, ShareGroupSettings(lock_duration_ms=0), SNAPSHOT)


def test_user_topics_cannot_take_the_reserved_prefix() -> None:
    assert check_user_topic_name("__consumer_offsets") == "__consumer_offsets"
    assert check_user_topic_name("yak_share_state") == "yak_share_state"
    for name in (SHARE_STATE_TOPIC, "__yak_x"):
        with pytest.raises(InvalidTopicError, match="reserved"):
            check_user_topic_name(name)


@pytest.mark.parametrize(
    ("brokers", "factor", "configs"),
    [
        (1, 1, {"cleanup.policy": "compact"}),
        (2, 2, {"cleanup.policy": "compact"}),
        (3, 3, {"cleanup.policy": "compact", "min.insync.replicas": "2"}),
        (7, 3, {"cleanup.policy": "compact", "min.insync.replicas": "2"}),
    ],
)
def test_state_topic_spec(brokers: int, factor: int, configs: dict[str, str]) -> None:
    spec = state_topic_spec(brokers)
    assert (spec.partitions, spec.replication_factor, spec.configs) == (16, factor, configs)
