"""Server-side partition assignors of consumer groups (pure functions).

An assignor maps each participant's subscribed topics, the partition counts of the existing
topics and the previous target assignment to a new target assignment. Every partition of a
topic somebody subscribes to goes to exactly one member subscribed to that topic; topics absent
from ``partition_counts`` (not created yet, or deleted) are ignored; every participant gets an
entry, possibly empty. Results depend only on the arguments (ties are broken by member id), so
any coordinator computes the same assignment.

- ``range_assign`` is Kafka's RangeAssignor: per topic, the members subscribed to it sorted by
  id take contiguous ranges of partitions; the first ``n % k`` of them take one extra.
- ``uniform_assign`` is sticky and balanced, like KIP-848's UniformAssignor. Partitions first
  stay with their previous owner (if still subscribed), unowned ones go to the least loaded
  subscriber, then partitions move one at a time from a member holding at least two more than
  a member subscribed to their topic, until no such move exists. So members with the same
  subscription end with counts that differ by at most one, and a partition changes owner only
  when balance requires it (a member joining takes partitions only from the others, a member
  leaving hands only its own partitions out).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from yak.types import TopicPartition

__all__ = [
    "ASSIGNORS",
    "Assignor",
    "MemberPartitions",
    "range_assign",
    "uniform_assign",
]

#: The partitions of each member.
MemberPartitions = dict[str, frozenset[TopicPartition]]
#: (subscriptions: member → topics, partition counts: topic → n, previous target) → target.
Assignor = Callable[
    [
        Mapping[str, frozenset[str]],
        Mapping[str, int],
        Mapping[str, frozenset[TopicPartition]],
    ],
    MemberPartitions,
]


def range_assign(
    subscriptions: Mapping[str, frozenset[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, frozenset[TopicPartition]],
) -> MemberPartitions:
    """Kafka's RangeAssignor (``previous`` is not used: the result depends on ids only)."""
    held: dict[str, set[TopicPartition]] = {member: set() for member in subscriptions}
    for topic in sorted(partition_counts):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        quota, extra = divmod(partition_counts[topic], len(members))
        start = 0
        for index, member in enumerate(members):
            size = quota + (1 if index < extra else 0)
            held[member].update(TopicPartition(topic, p) for p in range(start, start + size))
            start += size
    return {member: frozenset(partitions) for member, partitions in held.items()}


class _Load:
    """Who holds what during ``uniform_assign``: partitions per member and topic."""

    def __init__(self, topics_of: Mapping[str, frozenset[str]]) -> None:
        self.topics_of = topics_of
        self.held: dict[str, dict[str, set[int]]] = {m: {} for m in topics_of}
        self.count: dict[str, int] = dict.fromkeys(topics_of, 0)

    def add(self, member: str, topic: str, partition: int) -> None:
        self.held[member].setdefault(topic, set()).add(partition)
        self.count[member] += 1

    def remove(self, member: str, topic: str, partition: int) -> None:
        self.held[member][topic].discard(partition)
        self.count[member] -= 1

    def least_loaded(self, members: list[str]) -> str:
        return min(members, key=lambda m: (self.count[m], m))

    def result(self) -> MemberPartitions:
        return {
            member: frozenset(
                TopicPartition(t, p) for t, partitions in by_topic.items() for p in partitions
            )
            for member, by_topic in self.held.items()
        }


def uniform_assign(
    subscriptions: Mapping[str, frozenset[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, frozenset[TopicPartition]],
) -> MemberPartitions:
    """Sticky, balanced assignment (see the module docstring)."""
    topics_of = {
        member: frozenset(t for t in topics if partition_counts.get(t, 0) > 0)
        for member, topics in subscriptions.items()
    }
    members = sorted(topics_of)
    subscribers: dict[str, list[str]] = {}
    for member in members:
        for topic in topics_of[member]:
            subscribers.setdefault(topic, []).append(member)
    load = _Load(topics_of)
    taken: set[TopicPartition] = set()
    for member in members:  # 1. partitions stay with their previous owner
        for topic, partition in sorted(previous.get(member, ())):
            valid = topic in topics_of[member] and 0 <= partition < partition_counts[topic]
            if valid and (topic, partition) not in taken:
                taken.add(TopicPartition(topic, partition))
                load.add(member, topic, partition)
    # 2. The others go to the least loaded subscriber, the most constrained topics first.
    for topic in sorted(subscribers, key=lambda t: (len(subscribers[t]), t)):
        for partition in range(partition_counts[topic]):
            if (topic, partition) not in taken:
                load.add(load.least_loaded(subscribers[topic]), topic, partition)
    # 3. Move partitions one at a time towards balance (the sum of squared counts falls by at
    # least 2 on every move, so this ends).
    while (move := _improving_move(load, members, previous)) is not None:
        donor, receiver, (topic, partition) = move
        load.remove(donor, topic, partition)
        load.add(receiver, topic, partition)
    return load.result()


def _improving_move(
    load: _Load, members: list[str], previous: Mapping[str, frozenset[TopicPartition]]
) -> tuple[str, str, TopicPartition] | None:
    """A partition some member holds while a member subscribed to its topic has 2+ fewer.

    The least loaded receiver first, the most loaded donor; the donor gives a partition it did
    not hold before if it has one.
    """
    by_load = sorted(members, key=lambda m: (load.count[m], m))
    for receiver in by_load:
        wanted = load.count[receiver] + 2
        for donor in reversed(by_load):
            if load.count[donor] < wanted:
                break
            had = previous.get(donor, frozenset())
            candidates = [
                ((topic, partition) in had, topic, partition)
                for topic in load.topics_of[receiver]
                for partition in load.held[donor].get(topic, ())
            ]
            if candidates:
                _, topic, partition = min(candidates)
                return donor, receiver, TopicPartition(topic, partition)
    return None


#: The assignors by the name members ask for (``GroupMember.assignor``).
ASSIGNORS: Mapping[str, Assignor] = {"range": range_assign, "uniform": uniform_assign}
