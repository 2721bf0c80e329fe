import pytest
from hypothesis import given
from hypothesis import strategies as st

from yak.errors import InvalidGroupIdError, InvalidTopicError
from yak.metadata.keyspace import KeyKind, Keyspace, ParsedKey

KS = Keyspace("prod-1")
names = st.from_regex(r"[a-zA-Z0-9._-]{1,40}", fullmatch=True).filter(
    lambda s: s not in {".", ".."}
)


def test_every_key_lives_under_the_cluster_prefix() -> None:
    keys = [
        KS.broker(3),
        KS.broker_record(3),
        KS.controller,
        KS.topic("orders"),
        KS.partition("orders", 7),
        KS.group_member("billing", "m-1"),
        KS.group_state("billing"),
        KS.group_positions("billing", "m-1"),
        KS.group_classic("billing"),
        KS.committed_offset("billing", "orders", 7),
        KS.producer_id_block,
        KS.principal("alice"),
        KS.acl("acl-1"),
        KS.share_group("jobs"),
    ]
    assert all(k.startswith("/yak/prod-1/") for k in keys)
    assert len(set(keys)) == len(keys)
    assert KS.partition("orders", 7) == "/yak/prod-1/partitions/orders/7"
    assert KS.committed_offset("g", "t", 0) == "/yak/prod-1/offsets/g/t/0"


@given(topic=names, group=names, member=names, partition=st.integers(0, 10_000))
def test_builders_and_parser_agree(topic: str, group: str, member: str, partition: int) -> None:
    assert KS.parse(KS.topic(topic)) == ParsedKey(KeyKind.TOPIC, topic=topic)
    assert KS.parse(KS.partition(topic, partition)) == ParsedKey(
        KeyKind.PARTITION, topic=topic, partition=partition
    )
    assert KS.parse(KS.group_member(group, member)) == ParsedKey(
        KeyKind.GROUP_MEMBER, group=group, member=member
    )
    assert KS.parse(KS.share_group(group)) == ParsedKey(KeyKind.SHARE_GROUP, group=group)
    assert KS.parse(KS.group_classic(group)) == ParsedKey(KeyKind.GROUP_CLASSIC, group=group)
    assert not KS.group_classic(group).startswith(KS.group_members_prefix(group))
    assert KS.share_group(group).startswith(KS.share_groups_prefix)
    assert not KS.share_group(group).startswith(KS.groups_prefix)
    assert KS.parse(KS.committed_offset(group, topic, partition).encode()) == ParsedKey(
        KeyKind.COMMITTED_OFFSET, group=group, topic=topic, partition=partition
    )


def test_parser_rejects_foreign_and_malformed_keys() -> None:
    assert KS.parse("/yak/other/topics/a") is None
    assert KS.parse("/yak/prod-1/partitions/a/not-a-number") is None
    assert KS.parse("/yak/prod-1/unknown/thing") is None
    assert KS.parse("/yak/prod-1/brokers/-1") is None
    assert KS.parse(KS.broker(12)) == ParsedKey(KeyKind.BROKER, broker_id=12)
    assert KS.parse(KS.decommission(3)) == ParsedKey(KeyKind.DECOMMISSION, broker_id=3)
    assert KS.parse("/yak/prod-1/decommissions/x") is None
    assert KS.broker_record(4) == "/yak/prod-1/broker-records/4"
    assert KS.parse(KS.broker_record(4)) == ParsedKey(KeyKind.BROKER_RECORD, broker_id=4)
    assert KS.parse("/yak/prod-1/broker-records/x") is None
    assert not KS.broker_record(4).startswith(KS.brokers_prefix)


def test_prefixes_of_one_topic_do_not_cover_another_with_the_same_start() -> None:
    assert not KS.partition("orders2", 0).startswith(KS.topic_partitions_prefix("orders"))
    assert KS.partition("orders", 0).startswith(KS.topic_partitions_prefix("orders"))


@pytest.mark.parametrize("bad", ["", "..", "a/b", "x" * 250])
def test_names_are_validated_before_they_become_keys(bad: str) -> None:
    with pytest.raises(InvalidTopicError):
        KS.topic(bad)
    with pytest.raises(InvalidGroupIdError):
        KS.group_state(bad)
    with pytest.raises(InvalidGroupIdError):
        KS.share_group(bad)


def test_bad_cluster_ids_and_negative_numbers_are_refused() -> None:
    with pytest.raises(ValueError, match="cluster id"):
        Keyspace("a/b")
    with pytest.raises(ValueError, match="partition"):
        KS.partition("t", -1)
    with pytest.raises(ValueError, match="invalid id"):
        KS.group_member("g", "a/b")
