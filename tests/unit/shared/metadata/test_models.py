import pytest
from pydantic import ValidationError

from yak.metadata.models import (
    BrokerLoad,
    BrokerRecord,
    BrokerRegistration,
    GroupState,
    GroupStateName,
    PartitionState,
    ShareGroupRecord,
    ShareOffsetReset,
    TopicPartitions,
    TopicRecord,
)


def test_values_round_trip_through_their_stored_bytes() -> None:
    state = GroupState(
        group_id="g",
        group_epoch=4,
        state=GroupStateName.COMPLETING_REBALANCE,
        target_assignment={"m1": (TopicPartitions(topic="t", partitions=(0, 2)),)},
        member_epochs={"m1": 3},
    )
    assert GroupState.decode(state.encode()) == state
    topic = TopicRecord(
        name="t", topic_id="abc", partitions=3, replication_factor=2, created_at_ms=1
    )
    assert TopicRecord.decode(topic.encode()).configs == {}


def test_unknown_fields_from_a_newer_writer_are_ignored() -> None:
    raw = b'{"topic":"t","partition":0,"replicas":[1,2],"isr":[1],"from_the_future":true}'
    state = PartitionState.decode(raw)
    assert state.replicas == (1, 2)
    assert not state.has_leader


def test_a_broker_record_keeps_fields_from_a_newer_writer_when_rewritten() -> None:
    raw = (
        b'{"broker_id":3,"host":"h","port":9,"first_registered_ms":1,"started_at_ms":2,'
        b'"last_seen_ms":5,"broker_epoch":41}'
    )
    record = BrokerRecord.decode(raw)
    assert (record.registered, record.incarnation, record.rack) == (True, "", None)
    rewritten = record.model_copy(update={"registered": False, "last_seen_ms": 6})
    assert b'"broker_epoch":41' in rewritten.encode()
    assert BrokerRecord.decode(rewritten.encode()) == rewritten


def test_malformed_values_fail_loudly() -> None:
    with pytest.raises(ValidationError):
        PartitionState.decode(b'{"topic":"t","partition":-1,"replicas":[],"isr":[]}')
    with pytest.raises(ValidationError):
        TopicRecord.decode(b"not json")


def test_values_are_frozen() -> None:
    state = PartitionState(topic="t", partition=0, replicas=(1,), isr=(1,))
    with pytest.raises(ValidationError):
        state.leader = 1


_REGISTRATION = b'{"broker_id":1,"host":"h","port":9,"started_at_ms":1'


def test_a_registration_carries_its_load_sample_and_older_ones_have_none() -> None:
    assert BrokerRegistration.decode(_REGISTRATION + b"}").load is None
    sample = BrokerLoad(
        cpu=0.5, memory_bytes=3, disk_used_ratio=0.25, records_per_second=4.0, sampled_at_ms=5
    )
    registration = BrokerRegistration(broker_id=1, host="h", port=9, started_at_ms=1, load=sample)
    assert BrokerRegistration.decode(registration.encode()).load == sample
    assert sample.publish_interval_ms == 5_000  # what an older broker's sample implies


def test_a_malformed_or_newer_load_sample_never_hides_the_broker() -> None:
    newer = BrokerRegistration.decode(
        _REGISTRATION + b',"load":{"cpu":1,"memory_bytes":2,"disk_used_ratio":0.5,'
        b'"records_per_second":3,"sampled_at_ms":4,"gpu":0.9}}'
    )
    assert newer.load is not None
    assert newer.load.cpu == 1.0
    for bad in (b'{"cpu":-1}', b'"busy"', b'{"cpu":1,"disk_used_ratio":2}'):
        broken = BrokerRegistration.decode(_REGISTRATION + b',"load":' + bad + b"}")
        assert broken.broker_id == 1
        assert broken.load is None


def test_a_load_sample_is_stale_after_three_publish_intervals() -> None:
    sample = BrokerLoad(
        cpu=0.0,
        memory_bytes=0,
        disk_used_ratio=0.0,
        records_per_second=0.0,
        sampled_at_ms=1_000,
        publish_interval_ms=1_000,
    )
    assert not sample.stale(4_000)
    assert sample.stale(4_001)


def test_a_share_group_record_has_kafkas_defaults_and_bounds() -> None:
    record = ShareGroupRecord(name="jobs", created_at_ms=5)
    assert (record.max_delivery_attempts, record.lock_duration_ms) == (5, 30_000)
    assert record.offset_reset is ShareOffsetReset.LATEST
    assert record.dead_letter_topic is None
    assert ShareGroupRecord.decode(record.encode()) == record
    for bad in ({"max_delivery_attempts": 0}, {"lock_duration_ms": 999}, {"offset_reset": "x"}):
        with pytest.raises(ValidationError):
            ShareGroupRecord.model_validate({"name": "jobs", "created_at_ms": 5, **bad})
