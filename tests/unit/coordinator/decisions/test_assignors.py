"""The server-side assignors: Kafka's range examples, and properties of both under hypothesis."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yak.types import TopicPartition
from yak_coordinator.decisions.assignors import (
    ASSIGNORS,
    MemberPartitions,
    range_assign,
    uniform_assign,
)

Subscriptions = dict[str, frozenset[str]]

MEMBERS = [f"m{i}" for i in range(8)]
TOPICS = ["a", "b", "c", "d"]


def tps(topic: str, *partitions: int) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in partitions}


# -- range: Kafka's RangeAssignor examples ----------------------------------------------------


def test_range_kafka_javadoc_example() -> None:
    """RangeAssignor's javadoc: two consumers, two topics of three partitions each."""
    subs = {"C0": frozenset({"t0", "t1"}), "C1": frozenset({"t0", "t1"})}
    result = range_assign(subs, {"t0": 3, "t1": 3}, {})
    assert result == {"C0": tps("t0", 0, 1) | tps("t1", 0, 1), "C1": tps("t0", 2) | tps("t1", 2)}


def test_range_multiple_consumers_mixed_topics() -> None:
    """Kafka's RangeAssignorTest.testMultipleConsumersMixedTopics."""
    subs = {
        "consumer1": frozenset({"topic1"}),
        "consumer2": frozenset({"topic1", "topic2"}),
        "consumer3": frozenset({"topic1"}),
    }
    result = range_assign(subs, {"topic1": 3, "topic2": 2}, {})
    assert result == {
        "consumer1": tps("topic1", 0),
        "consumer2": tps("topic1", 1) | tps("topic2", 0, 1),
        "consumer3": tps("topic1", 2),
    }


def test_range_more_consumers_than_partitions_leaves_the_last_ones_idle() -> None:
    subs = {m: frozenset({"t"}) for m in ("a", "b", "c")}
    assert range_assign(subs, {"t": 2}, {}) == {"a": tps("t", 0), "b": tps("t", 1), "c": set()}


@pytest.mark.parametrize("assign", [range_assign, uniform_assign])
def test_missing_topics_and_unsubscribed_members(assign) -> None:
    subs = {"x": frozenset({"gone"}), "y": frozenset(), "z": frozenset({"t", "gone"})}
    assert assign(subs, {"t": 2, "other": 3}, {}) == {"x": set(), "y": set(), "z": tps("t", 0, 1)}


# -- properties of both -------------------------------------------------------------------------


@st.composite
def groups(draw: st.DrawFn) -> tuple[Subscriptions, dict[str, int]]:
    members = draw(st.lists(st.sampled_from(MEMBERS), min_size=1, max_size=6, unique=True))
    subs = {m: frozenset(draw(st.sets(st.sampled_from([*TOPICS, "missing"])))) for m in members}
    counts = {t: draw(st.integers(1, 12)) for t in draw(st.sets(st.sampled_from(TOPICS)))}
    return subs, counts


@st.composite
def previous_assignments(draw: st.DrawFn) -> dict[str, frozenset[TopicPartition]]:
    """Anything, including stale owners, partitions that no longer exist and duplicates."""
    partition = st.builds(TopicPartition, st.sampled_from(TOPICS), st.integers(0, 14))
    return draw(st.dictionaries(st.sampled_from(MEMBERS), st.frozensets(partition, max_size=10)))


def check_complete_and_valid(
    result: MemberPartitions, subs: Subscriptions, counts: Mapping[str, int]
) -> None:
    assert set(result) == set(subs)
    owners = Counter(tp for partitions in result.values() for tp in partitions)
    wanted = {
        (t, p) for topics in subs.values() for t in topics if t in counts for p in range(counts[t])
    }
    assert set(owners) == wanted, "every subscribed partition is assigned, nothing else"
    assert all(n == 1 for n in owners.values()), "exactly once"
    for member, partitions in result.items():
        assert all(t in subs[member] for t, _ in partitions), "only to subscribers of the topic"


def check_no_improving_move(result: MemberPartitions, subs: Subscriptions) -> None:
    """Balance: nobody holds 2+ more than a member subscribed to one of its partitions' topics
    (so members with the same subscription differ by at most one)."""
    for receiver, mine in result.items():
        for donor, theirs in result.items():
            if len(theirs) >= len(mine) + 2:
                assert not any(t in subs[receiver] for t, _ in theirs), (receiver, donor)


@settings(max_examples=300, deadline=None)
@given(group=groups(), previous=previous_assignments(), name=st.sampled_from(sorted(ASSIGNORS)))
def test_every_subscribed_partition_is_assigned_once_to_a_subscriber(
    group: tuple[Subscriptions, dict[str, int]], previous, name: str
) -> None:
    subs, counts = group
    result = ASSIGNORS[name](subs, counts, previous)
    check_complete_and_valid(result, subs, counts)
    # Deterministic, whatever the order of the mappings.
    shuffled = dict(reversed(list(subs.items())))
    assert ASSIGNORS[name](shuffled, dict(reversed(list(counts.items()))), previous) == result


@settings(max_examples=300, deadline=None)
@given(group=groups())
def test_range_gives_contiguous_ranges_first_members_one_extra(
    group: tuple[Subscriptions, dict[str, int]],
) -> None:
    subs, counts = group
    result = range_assign(subs, counts, {})
    for topic, count in counts.items():
        members = sorted(m for m in subs if topic in subs[m])
        if not members:
            continue
        ranges = [sorted(p for t, p in result[m] if t == topic) for m in members]
        assert [p for r in ranges for p in r] == list(range(count)), "contiguous, in id order"
        sizes = [len(r) for r in ranges]
        assert sizes == sorted(sizes, reverse=True)
        assert max(sizes) - min(sizes) <= 1


@settings(max_examples=300, deadline=None)
@given(group=groups(), previous=previous_assignments())
def test_uniform_is_balanced_and_idempotent(
    group: tuple[Subscriptions, dict[str, int]], previous
) -> None:
    subs, counts = group
    result = uniform_assign(subs, counts, previous)
    check_no_improving_move(result, subs)
    assert uniform_assign(subs, counts, result) == result, "a balanced target stays put"


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(1, 6),
    topics=st.sets(st.sampled_from(TOPICS), min_size=1),
    counts=st.lists(st.integers(1, 12), min_size=4, max_size=4),
    joiner=st.sampled_from(MEMBERS),
)
def test_uniform_join_only_takes_for_the_newcomer(size, topics, counts, joiner) -> None:
    """Same subscriptions: a member joining gets its share; nothing else moves."""
    partition_counts = dict(zip(TOPICS, counts, strict=True))
    members = [m for m in MEMBERS if m != joiner][:size]
    before = uniform_assign(dict.fromkeys(members, frozenset(topics)), partition_counts, {})
    after = uniform_assign(
        dict.fromkeys([*members, joiner], frozenset(topics)), partition_counts, before
    )
    moved = {tp for m in members for tp in before[m] - after[m]}
    assert moved == after[joiner]
    total = sum(partition_counts[t] for t in topics)
    assert len(after[joiner]) == total // (size + 1)
    assert max(len(a) for a in after.values()) - min(len(a) for a in after.values()) <= 1


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(2, 7),
    topics=st.sets(st.sampled_from(TOPICS), min_size=1),
    counts=st.lists(st.integers(1, 12), min_size=4, max_size=4),
    data=st.data(),
)
def test_uniform_leave_only_hands_out_the_leavers_partitions(size, topics, counts, data) -> None:
    partition_counts = dict(zip(TOPICS, counts, strict=True))
    members = MEMBERS[:size]
    leaver = data.draw(st.sampled_from(members))
    before = uniform_assign(dict.fromkeys(members, frozenset(topics)), partition_counts, {})
    stay = [m for m in members if m != leaver]
    after = uniform_assign(dict.fromkeys(stay, frozenset(topics)), partition_counts, before)
    for member in stay:
        assert before[member] <= after[member], "the others keep all they had"
    assert max(len(a) for a in after.values()) - min(len(a) for a in after.values()) <= 1


def test_uniform_heterogeneous_subscriptions() -> None:
    """A member alone on a topic keeps it; the shared topic balances the totals."""
    subs = {"a": frozenset({"t1"}), "b": frozenset({"t1", "t2"}), "c": frozenset({"t1", "t2"})}
    result = uniform_assign(subs, {"t1": 6, "t2": 3}, {})
    check_complete_and_valid(result, subs, {"t1": 6, "t2": 3})
    assert sorted(len(p) for p in result.values()) == [3, 3, 3]


def test_uniform_keeps_previous_owners_when_balanced() -> None:
    subs = {"a": frozenset({"t"}), "b": frozenset({"t"})}
    previous = {"a": frozenset(tps("t", 1, 3)), "b": frozenset(tps("t", 0, 2))}
    assert uniform_assign(subs, {"t": 4}, previous) == previous
    # A fifth partition goes to either, the four stay.
    grown = uniform_assign(subs, {"t": 5}, previous)
    assert grown["a"] >= previous["a"]
    assert grown["b"] >= previous["b"]
