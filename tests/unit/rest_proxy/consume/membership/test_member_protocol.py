"""``member_protocol``: each decision as a pure function of the member, its grant and the time —
what it writes, what it guards the write with, and the member it leaves."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from yak.errors import FencedMemberEpochError, IllegalStateError
from yak.metadata.models import GroupMember, TopicPartitions
from yak.types import TopicPartition
from yak_rest_proxy.consume.membership import member_protocol as protocol
from yak_rest_proxy.consume.membership.member_state import (
    DeleteMember,
    Grant,
    Guard,
    Key,
    Member,
    MemberRead,
    PutCommit,
    PutMember,
    PutPositions,
    Step,
    StoredPositions,
    Write,
)

NOW = 1_700_000_000_000
ME, OTHER = "proxy-a", "proxy-b"
T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


def read(
    *,
    owned: tuple[int, ...] = (),
    epoch: int = 0,
    grant: Grant | None = None,
    stored: StoredPositions | None = None,
    **fields: Any,
) -> MemberRead:
    """A member record at revision 10, positions at revision 11, state at revision 9."""
    fields.setdefault("subscription", ("t",))
    record = GroupMember(
        member_id="m",
        joined_at_ms=1,
        lease_id=77,
        owned=(TopicPartitions(topic="t", partitions=owned),) if owned else (),
        member_epoch=epoch,
        **fields,
    )
    return MemberRead(
        "g",
        "m",
        record,
        10,
        grant if grant is not None else Grant(9, 12),
        stored if stored is not None else StoredPositions(11, holder=ME),
    )


def held(**kwargs: Any) -> Member:
    return protocol.adopt(read(**kwargs), ME)


def ops(step: Step) -> tuple[object, ...]:
    assert step.write is not None
    return step.write.ops


def guards(write: Write | None) -> set[Guard]:
    assert write is not None
    return set(write.guards)


# -- reconcile ------------------------------------------------------------------------------------


def test_reconcile_takes_the_grant_in_one_guarded_write() -> None:
    member = held()
    step = protocol.reconcile(member, Grant(20, 21, frozenset({T0, T1}), 3), NOW)
    assert (step.member.owned, step.member.epoch) == (frozenset({T0, T1}), 3)
    assert guards(step.write) == {
        Guard(Key.MEMBER, 10),
        Guard(Key.STATE, 20),
        Guard(Key.POSITIONS, 11),
    }
    assert ops(step) == (PutMember(step.member), PutPositions({}, 3, ME))


def test_released_partitions_are_auto_committed_and_their_positions_dropped() -> None:
    member = held(owned=(0, 1), epoch=2, grant=Grant(9, 12, frozenset({T0, T1}), 2))
    member = protocol.positioned(member, {T0: 5, T1: 7})
    member = protocol.polled(member, {T0: 5, T1: 7}, {T0: 8})
    step = protocol.reconcile(member, Grant(20, 21, frozenset({T1}), 4), NOW)
    assert ops(step) == (
        PutCommit(T0, 8, 4, NOW),
        PutMember(step.member),
        PutPositions({T1: 7}, 4, ME),
    )
    after = step.member
    assert (set(after.owned), after.positions, after.stored) == ({T1}, {T1: 7}, {T1: 7})
    assert T0 not in after.processed


def test_without_auto_commit_a_release_commits_nothing() -> None:
    member = held(owned=(0,), grant=Grant(9, 12, frozenset({T0}), 1), auto_commit=False)
    member = protocol.positioned(member, {T0: 5})
    step = protocol.reconcile(member, Grant(20, 21), NOW)
    assert not [op for op in ops(step) if isinstance(op, PutCommit)]
    assert step.member.owned == frozenset()


def test_a_state_change_for_others_writes_nothing() -> None:
    member = held(owned=(0,), epoch=2, grant=Grant(9, 12, frozenset({T0}), 2))
    step = protocol.reconcile(member, Grant(30, 31, frozenset({T0}), 2), NOW)
    assert step.write is None
    assert step.member.grant.revision == 30


def test_a_manual_member_owns_its_assignment_whatever_the_state() -> None:
    member = protocol.assign(held(subscription=()), [T2]).member
    step = protocol.reconcile(member, Grant(30, 31, frozenset({T0}), 5), NOW)
    assert (step.member.owned, step.member.epoch) == (frozenset({T2}), 0)


def test_subscription_and_manual_assignment_exclude_each_other() -> None:
    with pytest.raises(IllegalStateError):
        protocol.assign(held(), [T0])
    manual = protocol.assign(held(subscription=()), [T0]).member
    with pytest.raises(IllegalStateError):
        protocol.subscribe(manual, ["t"], None)
    step = protocol.subscribe(held(subscription=()), ["t", "t", "u"], None)
    assert step.member.subscription == ("t", "u")
    assert guards(step.write) == {Guard(Key.MEMBER, 10)}
    assert protocol.unsubscribe(step.member).member.subscribed is False


# -- commits --------------------------------------------------------------------------------------


def owning(*partitions: TopicPartition, **kwargs: Any) -> Member:
    ids = tuple(p for _, p in partitions)
    grant = Grant(9, 12, frozenset(partitions), 2)
    return held(owned=ids, epoch=2, grant=grant, **kwargs)


def test_a_commit_of_a_partition_not_owned_is_fenced() -> None:
    member = owning(T0)
    with pytest.raises(FencedMemberEpochError):
        protocol.commit(member, {T1: 3}, NOW)
    with pytest.raises(FencedMemberEpochError):
        protocol.commit(member, {T0: 3}, NOW, member_epoch=1)  # a stale epoch


def test_a_commit_owned_but_no_longer_granted_is_fenced() -> None:
    revoked = replace(owning(T0, T1), grant=Grant(30, 31, frozenset({T0}), 5))
    with pytest.raises(FencedMemberEpochError):  # not reconciled yet: owned, but revoked
        protocol.commit(revoked, {T1: 1}, NOW)


def test_a_commit_is_fenced_by_the_state_and_writes_the_positions_through() -> None:
    member = protocol.positioned(owning(T0, T1), {T0: 4, T1: 9})
    step = protocol.commit(member, {T0: 3}, NOW, member_epoch=2)
    assert guards(step.write) == {
        Guard(Key.MEMBER, 10),
        Guard(Key.STATE, 9),
        Guard(Key.POSITIONS, 11),
    }
    assert ops(step) == (PutCommit(T0, 3, 2, NOW), PutPositions({T0: 4, T1: 9}, 2, ME))
    assert step.member.stored == step.member.positions
    assert step.member.auto_committed == {T0: 3}


def test_a_commit_writes_only_the_offsets_this_holder_has_not_committed() -> None:
    member = protocol.positioned(owning(T0, T1), {T0: 4, T1: 9})
    first = protocol.commit(member, {T0: 3, T1: 5}, NOW)
    assert [op for op in ops(first) if isinstance(op, PutCommit)] == [
        PutCommit(T0, 3, 2, NOW),
        PutCommit(T1, 5, 2, NOW),
    ]
    member = protocol.settle(first, 50)
    again = protocol.commit(member, {T0: 3, T1: 6}, NOW + 1)
    assert ops(again) == (PutCommit(T1, 6, 2, NOW + 1),)  # T0 is quiet: not rewritten
    assert Guard(Key.STATE, 9) in guards(again.write)  # still fenced by the group's state
    member = protocol.settle(again, 51)
    idle = protocol.commit(member, {T0: 3, T1: 6}, NOW + 2)
    assert idle.write is None  # nothing changed: nothing written
    assert idle.member.auto_committed == {T0: 3, T1: 6}
    moved = protocol.polled(idle.member, {T0: 4, T1: 9}, {T0: 7})
    step = protocol.commit(moved, {T0: 3, T1: 6}, NOW + 3)
    assert ops(step) == (PutPositions({T0: 7, T1: 9}, 2, ME),)  # the positions still go


def test_a_commit_that_did_not_land_is_written_again() -> None:
    member = protocol.positioned(owning(T0), {T0: 4})
    lost = protocol.commit(member, {T0: 3}, NOW)  # its write lost a race: never settled
    assert ops(lost)[0] == PutCommit(T0, 3, 2, NOW)
    assert PutCommit(T0, 3, 2, NOW) in ops(protocol.commit(member, {T0: 3}, NOW))


def test_a_manual_member_commits_without_the_group_fence() -> None:
    member = protocol.assign(held(subscription=()), [T0]).member
    member = protocol.reconcile(member, Grant(9, 12), NOW).member
    step = protocol.commit(member, {T0: 1}, NOW)
    assert Key.STATE not in {g.key for g in guards(step.write)}


def test_commit_of_every_position() -> None:
    member = owning(T0)
    assert protocol.commit(member, None, NOW).write is None  # nothing polled yet
    member = protocol.positioned(member, {T0: 6})
    assert PutCommit(T0, 6, 2, NOW) in ops(protocol.commit(member, None, NOW))


# -- positions --------------------------------------------------------------------------------


def test_a_poll_advances_positions_and_acknowledges_the_previous_ones() -> None:
    member = protocol.positioned(owning(T0, T1), {T0: 0, T1: 0})
    assert protocol.unpositioned(member) == []
    start = dict(member.positions)
    member = protocol.polled(member, start, {T0: 5})
    assert member.positions == {T0: 5, T1: 0}
    assert member.processed == {T0: 0, T1: 0}
    assert member.dirty


def test_a_partition_moved_during_a_poll_keeps_its_new_position() -> None:
    member = protocol.positioned(owning(T0, T1), {T0: 0, T1: 0})
    start = dict(member.positions)
    member = protocol.seek(member, {T0: 40}).member  # a seek while the fetch was under way
    member = protocol.polled(member, start, {T0: 5, T1: 3})
    assert member.positions == {T0: 40, T1: 3}


def test_seek_is_written_through_and_only_for_owned_partitions() -> None:
    member = owning(T0)
    with pytest.raises(IllegalStateError):
        protocol.seek(member, {T1: 0})
    step = protocol.seek(member, {T0: 12})
    assert ops(step) == (PutPositions({T0: 12}, 2, ME),)
    assert not step.member.dirty


def test_flush_writes_moved_positions_and_due_auto_commits_once() -> None:
    member = protocol.positioned(owning(T0), {T0: 0})
    member = protocol.polled(member, {T0: 0}, {T0: 5})
    member = protocol.polled(member, {T0: 5}, {T0: 9})
    step = protocol.flush(member, NOW)
    assert ops(step) == (PutCommit(T0, 5, 2, NOW), PutPositions({T0: 9}, 2, ME))
    assert Guard(Key.STATE, 9) in guards(step.write)
    flushed = protocol.settle(step, 50)
    assert (flushed.positions_revision, flushed.dirty) == (50, False)
    assert protocol.flush(flushed, NOW).write is None


def test_flush_without_auto_commit_writes_positions_only() -> None:
    member = protocol.positioned(owning(T0, auto_commit=False), {T0: 0})
    member = protocol.polled(member, {T0: 0}, {T0: 5})
    step = protocol.flush(member, NOW)
    assert ops(step) == (PutPositions({T0: 5}, 2, ME),)
    assert Key.STATE not in {g.key for g in guards(step.write)}


# -- holding ----------------------------------------------------------------------------------


def test_a_member_nobody_holds_is_claimed() -> None:
    unheld = read(stored=StoredPositions(11, {T0: 3}))
    assert protocol.may_claim(unheld, ME)
    step = protocol.claim(unheld, ME)
    assert ops(step) == (PutPositions({T0: 3}, 0, ME),)
    assert guards(step.write) == {Guard(Key.MEMBER, 10), Guard(Key.POSITIONS, 11)}
    assert protocol.claim(read(), ME).write is None  # already ours


def test_a_member_held_elsewhere_is_asked_for_then_taken_over_if_unanswered() -> None:
    elsewhere = read(stored=StoredPositions(11, {T0: 3}, 1, OTHER))
    assert not protocol.may_claim(elsewhere, ME)
    request = protocol.ask(elsewhere, ME)
    assert request.ops == (PutPositions({T0: 3}, 1, OTHER, wanted_by=ME),)
    assert set(request.guards) == {Guard(Key.MEMBER, 10), Guard(Key.POSITIONS, 11)}
    unanswered = read(stored=StoredPositions(12, {T0: 3}, 1, OTHER, ME))
    assert protocol.may_claim(unanswered, ME, asked=12)
    assert not protocol.may_claim(unanswered, ME, asked=0)
    answered_elsewhere = read(stored=StoredPositions(13, {T0: 8}, 1, "proxy-c"))
    assert not protocol.may_claim(answered_elsewhere, ME, asked=12)


def test_release_hands_over_the_positions_and_the_due_commits() -> None:
    member = protocol.positioned(owning(T0), {T0: 0})
    member = protocol.polled(protocol.polled(member, {T0: 0}, {T0: 5}), {T0: 5}, {T0: 7})
    write = protocol.release(member, NOW, OTHER)
    assert write.ops == (PutCommit(T0, 5, 2, NOW), PutPositions({T0: 7}, 2, OTHER))
    assert set(write.guards) == {
        Guard(Key.MEMBER, 10),
        Guard(Key.POSITIONS, 11),
        Guard(Key.STATE, 9),
    }


def test_refresh_keeps_the_holders_positions_until_another_proxy_holds_it() -> None:
    member = protocol.polled(protocol.positioned(owning(T0), {T0: 0}), {T0: 0}, {T0: 30})
    asked = read(
        owned=(0,),
        epoch=2,
        grant=Grant(9, 12, frozenset({T0}), 2),
        stored=StoredPositions(14, {T0: 0}, 2, ME, OTHER),
    )
    fresh = protocol.refresh(member, asked)
    assert fresh is not None
    assert (fresh.positions, fresh.stored, fresh.positions_revision) == ({T0: 30}, {T0: 0}, 14)
    taken = read(owned=(0,), stored=StoredPositions(15, {T0: 0}, 2, OTHER))
    assert protocol.refresh(member, taken) is None


def test_leave_deletes_the_member() -> None:
    write = protocol.leave(held())
    assert (write.guards, write.ops, write.lease_id) == ((), (DeleteMember(),), 77)


def test_settle_records_the_revisions_a_write_got() -> None:
    member = held()
    step = protocol.reconcile(member, Grant(20, 21, frozenset({T0}), 3), NOW)
    settled = protocol.settle(step, 40)
    assert (settled.revision, settled.positions_revision, settled.grant.as_of) == (40, 40, 40)
    record_only = protocol.settle(protocol.unsubscribe(settled), 41)
    assert (record_only.revision, record_only.positions_revision) == (41, 40)


def test_an_ask_seen_by_the_watch_becomes_the_guard_of_the_release() -> None:
    member = protocol.polled(protocol.positioned(owning(T0), {T0: 0}), {T0: 0}, {T0: 4})
    request = StoredPositions(20, {T0: 0}, 2, ME, OTHER)
    after = protocol.asked(member, request)
    assert (after.positions_revision, after.positions) == (20, {T0: 4})
    assert Guard(Key.POSITIONS, 20) in protocol.release(after, NOW, OTHER).guards
    assert protocol.asked(member, StoredPositions(20, {}, 2, OTHER)) is member  # taken: no


def test_only_owned_partitions_may_be_sought() -> None:
    protocol.require_owned(owning(T0), [T0])
    with pytest.raises(IllegalStateError):
        protocol.require_owned(owning(T0), [T0, T1])
