"""The next state of one consumer group: a pure function of its records (the contract is
``docs/consumer-groups.md``, "Coordinator side").

``reconcile_group(group_id, members, previous, partition_counts, now_ms)`` takes the live member
records, the stored ``GroupState`` (or None), the partition counts of the existing topics and
the time, and returns a ``GroupDecision``: the state to write (None when the stored one
stands), the members to remove because they held a partition past their rebalance timeout, and
when to run again (the earliest pending rebalance deadline). Same inputs, same decision; and
reconciling the state it produced with the same records changes nothing, so a driver that
re-reads after its own write settles at once.

- **Participants** are the members with a subscription and no manual assignment. Their
  resolved topics are the existing topics their subscription names, or that their pattern
  matches in full (an invalid pattern matches nothing).
- **group_epoch** increases when the participants, their resolved topics, those topics'
  partition counts or the chosen assignor differ from what the stored state records
  (``subscriptions``, ``topic_partitions``, ``assignor``); only then is the target recomputed.
- **Owners**: a member without a manual assignment holds what its record lists in ``owned``.
  Manual members' ``owned`` lists their own partitions, outside the group's assignment.
- A member fenced by the rebalance timeout is left out of the group and the state is computed
  without it, so the driver can delete it and write the state in one transaction.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from yak.metadata.models import Assignment, GroupMember, GroupState, GroupStateName, TopicPartitions
from yak.metadata.snapshot import ClusterSnapshot
from yak.types import TopicPartition
from yak_coordinator.decisions.assignors import ASSIGNORS

__all__ = [
    "DEFAULT_ASSIGNOR",
    "GroupDecision",
    "GroupInputs",
    "as_assignment",
    "group_inputs",
    "partition_counts",
    "partition_set",
    "rebalance_pending",
    "reconcile_group",
    "resolve_topics",
    "stored_inputs",
]

DEFAULT_ASSIGNOR = "uniform"


@dataclass(frozen=True, slots=True)
class GroupDecision:
    """What ``reconcile_group`` decided for one group."""

    #: The state to write; None when the stored state stands.
    state: GroupState | None
    #: Members to remove (their member record and positions), by id.
    fenced: tuple[str, ...] = ()
    #: When a pending rebalance deadline falls due (ms), if any.
    next_deadline_ms: int | None = None


class GroupInputs(NamedTuple):
    """What a target assignment is computed from (recorded in the state it produced)."""

    subscriptions: dict[str, tuple[str, ...]]
    topic_partitions: dict[str, int]
    assignor: str


def partition_counts(snapshot: ClusterSnapshot) -> dict[str, int]:
    """The partition count of every existing topic (topics being deleted do not count)."""
    return {name: t.partitions for name, t in snapshot.topics.items() if not t.deleting}


def partition_set(assignment: Assignment) -> frozenset[TopicPartition]:
    """An assignment as a set of (topic, partition)."""
    return frozenset(TopicPartition(tp.topic, p) for tp in assignment for p in tp.partitions)


def as_assignment(partitions: Iterable[TopicPartition]) -> Assignment:
    """A set of (topic, partition) in its stored form: by topic, partitions sorted."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(set(partitions)):
        by_topic.setdefault(topic, []).append(partition)
    return tuple(TopicPartitions(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items())


def resolve_topics(member: GroupMember, topics: Iterable[str]) -> tuple[str, ...]:
    """The existing topics (``topics``) the member subscribes to, sorted."""
    if member.subscription_pattern is not None:
        try:
            pattern = re.compile(member.subscription_pattern)
        except re.error:
            return ()
        return tuple(sorted(t for t in topics if pattern.fullmatch(t)))
    wanted = set(member.subscription)
    return tuple(sorted(t for t in topics if t in wanted))


def _participates(member: GroupMember) -> bool:
    return member.subscribed and not member.manual_assignment


def group_inputs(
    members: Mapping[str, GroupMember], partition_counts: Mapping[str, int], fallback: str
) -> GroupInputs:
    """The participants' resolved topics, those topics' counts and the chosen assignor.

    The assignor is the one most participants ask for (known names only; ties by name), else
    ``fallback`` (the stored one).
    """
    subscriptions = {
        member_id: resolve_topics(member, partition_counts)
        for member_id, member in sorted(members.items())
        if _participates(member)
    }
    topics = sorted({t for resolved in subscriptions.values() for t in resolved})
    votes = Counter(members[m].assignor for m in subscriptions if members[m].assignor in ASSIGNORS)
    ranked = sorted(votes.items(), key=lambda item: (-item[1], item[0]))
    assignor = ranked[0][0] if ranked else fallback
    return GroupInputs(subscriptions, {t: partition_counts[t] for t in topics}, assignor)


def stored_inputs(state: GroupState) -> GroupInputs:
    """The inputs a stored state was computed from."""
    return GroupInputs(dict(state.subscriptions), dict(state.topic_partitions), state.assignor)


def rebalance_pending(
    state: GroupState | None,
    members: Mapping[str, GroupMember],
    partition_counts: Mapping[str, int],
) -> bool:
    """Whether the live records differ from what ``state`` was computed from: a reader reports
    ``PreparingRebalance`` until the controller writes the next group epoch."""
    fallback = state.assignor if state is not None else DEFAULT_ASSIGNOR
    inputs = group_inputs(members, partition_counts, fallback)
    if state is None:
        return bool(inputs.subscriptions)
    return inputs != stored_inputs(state)


def reconcile_group(
    group_id: str,
    members: Mapping[str, GroupMember],
    previous: GroupState | None,
    partition_counts: Mapping[str, int],
    now_ms: int,
) -> GroupDecision:
    """The next state of the group (see the module docstring)."""
    if previous is None and not members:
        return GroupDecision(None)
    base = previous if previous is not None else GroupState(group_id=group_id)
    live = dict(members)
    fenced: list[str] = []
    while True:
        state, deadlines = _next_state(base, live, partition_counts, now_ms)
        expired = sorted(m for m, deadline in deadlines.items() if deadline <= now_ms)
        if not expired:
            break
        fenced += expired
        for member_id in expired:
            del live[member_id]
    next_deadline = min(deadlines.values(), default=None)
    changed = previous is None or state != previous
    return GroupDecision(state if changed else None, tuple(fenced), next_deadline)


def _next_state(
    base: GroupState,
    members: Mapping[str, GroupMember],
    partition_counts: Mapping[str, int],
    now_ms: int,
) -> tuple[GroupState, dict[str, int]]:
    """The state for these live members, and each revoking member's deadline (ms)."""
    inputs = group_inputs(members, partition_counts, base.assignor)
    previous_target = {m: partition_set(a) for m, a in base.target_assignment.items()}
    if inputs != stored_inputs(base):
        group_epoch = base.group_epoch + 1
        assignment_epoch = group_epoch
        subscriptions = {m: frozenset(topics) for m, topics in inputs.subscriptions.items()}
        assign = ASSIGNORS[inputs.assignor]
        target = assign(subscriptions, inputs.topic_partitions, previous_target)
    else:
        group_epoch, assignment_epoch = base.group_epoch, base.assignment_epoch
        target = {m: previous_target.get(m, frozenset()) for m in inputs.subscriptions}
    owned = {
        member_id: partition_set(member.owned)
        for member_id, member in members.items()
        if not member.manual_assignment
    }
    holders: Counter[TopicPartition] = Counter(tp for held in owned.values() for tp in held)
    current: dict[str, Assignment] = {}
    member_epochs: dict[str, int] = {}
    for member_id, partitions in sorted(target.items()):
        mine = owned.get(member_id, frozenset())
        # Not while another member still holds it: never two owners.
        allowed = [tp for tp in partitions if holders[tp] == (1 if tp in mine else 0)]
        current[member_id] = as_assignment(allowed)
        unchanged = base.current_assignment.get(member_id) == current[member_id]
        if unchanged and member_id in base.member_epochs:
            member_epochs[member_id] = base.member_epochs[member_id]
        else:
            member_epochs[member_id] = group_epoch
    revoking: dict[str, int] = {}
    deadlines: dict[str, int] = {}
    for member_id, held in sorted(owned.items()):
        if held - target.get(member_id, frozenset()):
            since = base.revoking_since_ms.get(member_id, now_ms)
            revoking[member_id] = since
            deadlines[member_id] = since + members[member_id].rebalance_timeout_ms
    if not target:
        name = GroupStateName.EMPTY
    elif any(owned.get(m, frozenset()) != partitions for m, partitions in target.items()):
        name = GroupStateName.COMPLETING_REBALANCE
    else:
        name = GroupStateName.STABLE
    state = GroupState(
        group_id=base.group_id,
        group_epoch=group_epoch,
        assignment_epoch=assignment_epoch,
        state=name,
        assignor=inputs.assignor,
        target_assignment={m: as_assignment(target[m]) for m in sorted(target)},
        current_assignment=current,
        member_epochs=member_epochs,
        revoking_since_ms=revoking,
        topic_partitions=inputs.topic_partitions,
        subscriptions=inputs.subscriptions,
    )
    return state, deadlines
