"""``reconcile_group``: scenarios step by step, and a randomized simulation of the contract.

``Sim`` plays etcd and the members: it applies each decision (state written, fenced members
deleted) and lets members acknowledge as the rest-proxy does (``owned := current``). After every
step it checks the invariants: never two owners, current within target, a second reconcile
changes nothing.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from yak.metadata.models import GroupMember, GroupState, GroupStateName, TopicPartitions
from yak.types import TopicPartition
from yak_coordinator.decisions.group_reconcile import (
    GroupDecision,
    as_assignment,
    partition_set,
    rebalance_pending,
    reconcile_group,
)

START_MS = 1_000_000
TIMEOUT_MS = 60_000


class Sim:
    """One group's records, the controller's decisions applied to them."""

    def __init__(self, **topics: int) -> None:
        self.counts: dict[str, int] = dict(topics)
        self.members: dict[str, GroupMember] = {}
        self.state: GroupState | None = None
        self.now = START_MS

    def join(self, member_id: str, *topics: str, **fields: Any) -> None:
        if topics:
            fields["subscription"] = topics
        self.members[member_id] = GroupMember(
            member_id=member_id, joined_at_ms=self.now, rebalance_timeout_ms=TIMEOUT_MS, **fields
        )

    def update(self, member_id: str, **fields: Any) -> None:
        self.members[member_id] = self.members[member_id].model_copy(update=fields)

    def leave(self, member_id: str) -> None:
        del self.members[member_id]

    def ack(self, *member_ids: str) -> None:
        """What the proxy's reconcile does: own what the state grants, at its member epoch."""
        if self.state is None:
            return
        for m in member_ids or tuple(self.members):
            if m in self.state.current_assignment:
                self.update(
                    m,
                    owned=self.state.current_assignment[m],
                    member_epoch=self.state.member_epochs[m],
                )
            elif not self.members[m].manual_assignment:
                self.update(m, owned=())

    def step(self) -> GroupDecision:
        decision = reconcile_group("g", self.members, self.state, self.counts, self.now)
        for m in decision.fenced:
            del self.members[m]
        if decision.state is not None:
            assert self.state is None or decision.state.group_epoch >= self.state.group_epoch
            self.state = decision.state
        self.check()
        return decision

    def check(self) -> None:
        again = reconcile_group("g", self.members, self.state, self.counts, self.now)
        assert again.state is None, "a second reconcile changes nothing"
        assert again.fenced == ()
        if self.state is None:
            assert not self.members
            return
        held: dict[tuple[str, int], str] = {}
        for m, member in self.members.items():
            if member.manual_assignment:
                continue
            for tp in partition_set(member.owned):
                assert tp not in held, f"{tp} owned by {held[tp]} and {m}"
                held[tp] = m
        for m, current in self.state.current_assignment.items():
            assert partition_set(current) <= partition_set(self.state.target_assignment[m])
            for tp in partition_set(current):
                assert held.get(tp, m) == m, f"{tp} granted to {m} while {held[tp]} owns it"
        for epoch in self.state.member_epochs.values():
            assert epoch <= self.state.group_epoch

    def target(self, m: str) -> set[tuple[str, int]]:
        assert self.state is not None
        return set(partition_set(self.state.target_assignment[m]))

    def current(self, m: str) -> set[tuple[str, int]]:
        assert self.state is not None
        return set(partition_set(self.state.current_assignment[m]))

    def name(self) -> GroupStateName:
        assert self.state is not None
        return self.state.state


def tps(topic: str, *partitions: int) -> set[tuple[str, int]]:
    return {(topic, p) for p in partitions}


def test_nothing_stored_and_no_members_writes_nothing() -> None:
    assert reconcile_group("g", {}, None, {"t": 1}, START_MS) == GroupDecision(None)


def test_join_then_a_cooperative_move_never_has_two_owners() -> None:
    sim = Sim(t=4)
    sim.join("a", "t")
    sim.step()
    assert sim.state is not None
    assert sim.state.group_epoch == 1
    assert sim.name() is GroupStateName.COMPLETING_REBALANCE
    assert sim.current("a") == tps("t", 0, 1, 2, 3)
    sim.ack()
    sim.step()
    assert sim.name() is GroupStateName.STABLE

    sim.now += 10
    sim.join("b", "t")
    decision = sim.step()
    assert sim.state is not None
    assert sim.state.group_epoch == 2
    assert len(sim.target("a")) == len(sim.target("b")) == 2
    assert sim.current("b") == set(), "a still owns them"
    assert sim.current("a") == sim.target("a")
    assert sim.state.revoking_since_ms == {"a": sim.now}
    assert decision.next_deadline_ms == sim.now + TIMEOUT_MS
    assert sim.state.member_epochs == {"a": 2, "b": 2}

    sim.ack("b")  # b adopts nothing yet
    sim.step()
    assert sim.current("b") == set()
    sim.ack("a")  # a releases
    decision = sim.step()
    assert sim.current("b") == sim.target("b")
    assert sim.state.revoking_since_ms == {}
    assert decision.next_deadline_ms is None
    assert sim.name() is GroupStateName.COMPLETING_REBALANCE
    sim.ack("b")
    sim.step()
    assert sim.name() is GroupStateName.STABLE
    assert sim.state.group_epoch == 2


def test_leave_hands_the_partitions_to_the_others_at_once() -> None:
    sim = Sim(t=4)
    sim.join("a", "t")
    sim.join("b", "t")
    sim.step()
    sim.ack()
    sim.step()
    assert sim.name() is GroupStateName.STABLE
    kept = sim.target("a")
    sim.leave("b")  # its lease expired: its owned went with it
    sim.step()
    assert sim.current("a") == tps("t", 0, 1, 2, 3)
    assert sim.target("a") >= kept
    assert sim.state is not None
    assert set(sim.state.target_assignment) == {"a"}
    sim.leave("a")
    sim.step()
    assert sim.name() is GroupStateName.EMPTY
    assert sim.state.target_assignment == {}


def test_three_way_shuffle_in_steps() -> None:
    """Members join one at a time and acknowledge in a bad order; ownership stays unique."""
    sim = Sim(t=6, u=3)
    sim.join("a", "t", "u")
    sim.step()
    sim.ack()
    sim.step()
    for newcomer in ("b", "c"):
        sim.join(newcomer, "t", "u")
        sim.step()
        sim.ack(newcomer)
        sim.step()
        assert sim.current(newcomer) <= sim.target(newcomer)
        for member in sorted(sim.members):
            sim.ack(member)
            sim.step()
    sim.ack()
    sim.step()
    assert sim.name() is GroupStateName.STABLE
    assert sorted(len(sim.target(m)) for m in "abc") == [3, 3, 3]


def test_pattern_subscription_follows_topic_creation() -> None:
    sim = Sim(ev1=2, events=1, other=1)
    sim.join("a", subscription_pattern="ev[0-9]+")
    sim.step()
    assert sim.target("a") == tps("ev1", 0, 1), "matched in full: not 'events'"
    epoch = sim.state.group_epoch if sim.state else 0
    sim.counts["ev2"] = 1
    sim.step()
    assert sim.target("a") == tps("ev1", 0, 1) | tps("ev2", 0)
    assert sim.state is not None
    assert sim.state.group_epoch == epoch + 1
    assert sim.state.subscriptions == {"a": ("ev1", "ev2")}


def test_invalid_pattern_subscribes_to_nothing() -> None:
    sim = Sim(t=1)
    sim.join("a", subscription_pattern="(")
    sim.join("b", "t")
    sim.step()
    assert (sim.target("a"), sim.target("b")) == (set(), tps("t", 0))


def test_partition_increase_bumps_the_epoch_and_assigns_the_new_ones() -> None:
    sim = Sim(t=2)
    sim.join("a", "t")
    sim.join("b", "t")
    sim.step()
    sim.ack()
    sim.step()
    before = {m: sim.target(m) for m in "ab"}
    sim.counts["t"] = 4
    sim.step()
    assert sim.state is not None
    assert sim.state.group_epoch == 2
    assert sim.state.topic_partitions == {"t": 4}
    for m in "ab":
        assert sim.target(m) >= before[m]
        assert len(sim.target(m)) == 2


def test_rebalance_timeout_fences_the_member_that_does_not_release() -> None:
    sim = Sim(t=2)
    sim.join("a", "t")
    sim.step()
    sim.ack()
    sim.step()
    sim.join("b", "t")
    decision = sim.step()
    assert decision.next_deadline_ms == sim.now + TIMEOUT_MS
    sim.now += TIMEOUT_MS - 1
    assert sim.step() == GroupDecision(None, (), START_MS + TIMEOUT_MS)
    sim.now += 1
    decision = sim.step()
    assert decision.fenced == ("a",)
    assert "a" not in sim.members
    assert sim.current("b") == tps("t", 0, 1)
    assert sim.state is not None
    assert sim.state.revoking_since_ms == {}
    assert decision.next_deadline_ms is None


def test_manual_assignment_members_take_no_part_and_block_nothing() -> None:
    manual = (TopicPartitions(topic="t", partitions=(0, 1)),)
    sim = Sim(t=2)
    sim.join("m", manual_assignment=manual, owned=manual)
    sim.step()
    assert sim.name() is GroupStateName.EMPTY
    assert sim.state is not None
    assert sim.state.target_assignment == {}
    sim.join("a", "t")
    sim.step()
    assert sim.current("a") == tps("t", 0, 1)
    assert "m" not in sim.state.target_assignment
    assert sim.state.revoking_since_ms == {}


def test_members_beyond_the_partition_count_are_idle() -> None:
    sim = Sim(t=2)
    for m in "abc":
        sim.join(m, "t")
    sim.step()
    sim.ack()
    sim.step()
    assert sorted(len(sim.target(m)) for m in "abc") == [0, 1, 1]
    assert sim.name() is GroupStateName.STABLE


def test_unsubscribed_member_must_release_what_it_owns() -> None:
    sim = Sim(t=2)
    sim.join("a", "t")
    sim.join("b", "t")
    sim.step()
    sim.ack()
    sim.step()
    sim.update("b", subscription=())
    sim.step()
    assert sim.target("a") == tps("t", 0, 1)
    assert sim.current("a") == sim.target("a") - partition_set(sim.members["b"].owned)
    assert sim.name() is GroupStateName.COMPLETING_REBALANCE
    assert sim.state is not None
    assert "b" in sim.state.revoking_since_ms
    sim.ack("b")
    sim.step()
    assert sim.current("a") == tps("t", 0, 1)


def test_assignor_is_the_majority_choice_ties_by_name() -> None:
    sim = Sim(t=4)
    sim.join("a", "t", assignor="range")
    sim.join("b", "t", assignor="uniform")
    sim.step()
    assert sim.state is not None
    assert sim.state.assignor == "range"
    assert sim.target("a") == tps("t", 0, 1)
    sim.join("c", "t", assignor="uniform")
    sim.join("d", "t", assignor="no-such")
    sim.step()
    assert sim.state.assignor == "uniform"


def test_subscription_change_bumps_the_epoch_even_with_the_same_topic_union() -> None:
    sim = Sim(t=2, u=2)
    sim.join("a", "t")
    sim.join("b", "t", "u")
    sim.step()
    epoch = sim.state.group_epoch if sim.state else 0
    sim.update("a", subscription=("u",))
    sim.step()
    assert sim.state is not None
    assert sim.state.group_epoch == epoch + 1
    assert all(t == "u" for t, _ in sim.target("a"))


def test_rebalance_pending_tells_a_reader_the_state_is_behind() -> None:
    sim = Sim(t=2)
    sim.join("a", "t")
    assert rebalance_pending(None, sim.members, sim.counts)
    sim.step()
    assert not rebalance_pending(sim.state, sim.members, sim.counts)
    sim.join("b", "t")
    assert rebalance_pending(sim.state, sim.members, sim.counts)
    sim.step()
    assert not rebalance_pending(sim.state, sim.members, sim.counts)


def test_assignment_conversions() -> None:
    assignment = as_assignment(
        [TopicPartition("u", 1), TopicPartition("t", 2), TopicPartition("t", 0)]
    )
    assert assignment == (
        TopicPartitions(topic="t", partitions=(0, 2)),
        TopicPartitions(topic="u", partitions=(1,)),
    )
    assert partition_set(assignment) == {("t", 0), ("t", 2), ("u", 1)}


# -- randomized ---------------------------------------------------------------------------------

ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("join"), st.sampled_from("abcde"), st.sampled_from(["t", "u", "tu"])),
        st.tuples(st.just("leave"), st.sampled_from("abcde"), st.just("")),
        st.tuples(st.just("resubscribe"), st.sampled_from("abcde"), st.sampled_from(["", "u"])),
        st.tuples(st.just("ack"), st.sampled_from("abcde"), st.just("")),
        st.tuples(st.just("grow"), st.sampled_from("tu"), st.just("")),
        st.tuples(st.just("wait"), st.just(""), st.just("")),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(actions=ACTIONS, assignor=st.sampled_from(["uniform", "range"]))
def test_random_histories_keep_the_invariants(actions, assignor) -> None:
    sim = Sim(t=3, u=2)
    for action, who, what in actions:
        if action == "join" and who not in sim.members:
            sim.join(who, *what, assignor=assignor)
        elif action == "leave" and who in sim.members:
            sim.leave(who)
        elif action == "resubscribe" and who in sim.members:
            sim.update(who, subscription=tuple(what))
        elif action == "ack" and who in sim.members:
            sim.ack(who)
        elif action == "grow":
            sim.counts[who] += 1
        elif action == "wait":
            sim.now += TIMEOUT_MS // 2
        sim.step()
    for _ in range(3):  # everyone cooperates: the group settles
        sim.ack()
        sim.step()
    if sim.state is not None:
        participants = any(m.subscription for m in sim.members.values())
        assert sim.name() is (GroupStateName.STABLE if participants else GroupStateName.EMPTY)
