import pytest
from pydantic import ValidationError

from yak.metadata.models import (
    BrokerRecord,
    GroupState,
    GroupStateName,
    PartitionState,
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
