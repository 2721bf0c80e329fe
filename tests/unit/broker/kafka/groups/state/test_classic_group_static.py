"""ClassicGroup: static members (KIP-345), the OffsetCommit checks, DescribeGroups and
ListGroups views, deletion and unloading."""

from __future__ import annotations

from tests.unit.broker.kafka.groups.state.support import E, GroupHarness
from yak_broker.kafka.groups.state.records import LeaveMember, Protocol

# --- static members ------------------------------------------------------------------------


def _static_stable(h: GroupHarness) -> tuple[str, str, int]:
    """A Stable group of static leader "s" (instance i-s) and dynamic follower: ids, gen."""
    s = h.join(client="s", instance="i-s")  # static members skip MEMBER_ID_REQUIRED
    static_id = h.joined(s).member_id
    b = h.new_member("b")
    h.join(static_id, client="s", instance="i-s")
    generation = h.joined(b).generation_id
    h.sync(static_id, generation, {static_id: b"S", h.joined(b).member_id: b"B"}, instance="i-s")
    h.sync(h.joined(b).member_id, generation)
    assert h.group.state == "Stable"
    return static_id, h.joined(b).member_id, generation


def test_a_static_member_restarting_takes_its_place_without_a_rebalance() -> None:
    h = GroupHarness()
    old_id, follower, generation = _static_stable(h)
    again = h.joined(h.join(client="s", instance="i-s"))
    assert again.error is E.NONE
    assert again.member_id != old_id
    assert (again.generation_id, again.leader) == (generation, again.member_id)
    # It led: it sees the members but is told not to assign again (JoinGroup v9).
    assert again.skip_assignment
    assert len(again.members) == 2
    assert h.group.state == "Stable"
    assert h.heartbeat(old_id, generation, "i-s") is E.FENCED_INSTANCE_ID
    assert h.heartbeat(again.member_id, generation, "i-s") is E.NONE
    assert h.synced(h.sync(again.member_id, generation, instance="i-s")).assignment == b"S"
    assert h.heartbeat(follower, generation) is E.NONE


def test_a_static_member_restarting_with_new_protocols_starts_a_round() -> None:
    h = GroupHarness()
    _static_stable(h)
    h.join(client="s", instance="i-s", protocols=(Protocol("range", b"other"),))
    assert h.group.state == "PreparingRebalance"


def test_a_static_member_replaced_while_its_join_is_parked_is_fenced() -> None:
    h = GroupHarness()
    old_id, follower, generation = _static_stable(h)
    parked = h.join(old_id, client="s", instance="i-s", protocols=(Protocol("range", b"x"),))
    newer = h.join(client="s", instance="i-s")
    assert h.joined(parked).error is E.FENCED_INSTANCE_ID
    h.join(follower, client="b")
    assert h.joined(newer).generation_id == generation + 1


def test_a_static_member_is_kept_through_a_round_it_misses_until_its_session_ends() -> None:
    h = GroupHarness()
    static_id, follower, generation = _static_stable(h)
    parked = h.join(follower, client="b", protocols=(Protocol("range", b"x"),))
    h.advance(9_000)  # the rebalance timeout (30 s) is far; the session (10 s) is not
    assert h.group.member(static_id) is not None
    assert h.join_result(parked) is None
    h.advance(1_000)
    assert h.group.member(static_id) is None
    assert h.joined(parked).generation_id == generation + 1


def test_a_commit_by_a_replaced_static_member_is_fenced() -> None:
    h = GroupHarness()
    old_id, _, generation = _static_stable(h)
    new_id = h.joined(h.join(client="s", instance="i-s")).member_id
    assert h.commit_check(old_id, generation, "i-s") is E.FENCED_INSTANCE_ID
    assert h.commit_check(new_id, generation, "i-s") is E.NONE


def test_a_static_leave_needs_the_instances_current_member_id() -> None:
    h = GroupHarness()
    static_id, _, _ = _static_stable(h)
    wrong = h.leave(LeaveMember("s-stale", "i-s"), LeaveMember("", "i-unknown"))
    assert [m.error for m in wrong.members] == [E.FENCED_INSTANCE_ID, E.UNKNOWN_MEMBER_ID]
    assert h.leave(LeaveMember(static_id, "i-s")).members[0].error is E.NONE
    assert h.group.member(static_id) is None


# --- OffsetCommit checks -------------------------------------------------------------------


def test_a_commit_from_a_stale_generation_is_refused() -> None:
    h = GroupHarness()
    leader, _follower, generation = h.stable_pair()
    assert h.commit_check(leader, generation) is E.NONE
    assert h.commit_check(leader, generation - 1) is E.ILLEGAL_GENERATION
    assert h.commit_check("ghost", generation) is E.UNKNOWN_MEMBER_ID
    assert h.commit_check("", -1) is E.UNKNOWN_MEMBER_ID  # simple commit, live group


def test_commits_during_a_round_follow_kafka() -> None:
    h = GroupHarness()
    leader, follower, generation = h.stable_pair()
    h.join(leader, client="a")
    # PreparingRebalance: the generation is not bumped yet, its commits still count.
    assert h.commit_check(follower, generation) is E.NONE
    h.join(follower, client="b")
    assert h.group.state == "CompletingRebalance"
    assert h.commit_check(follower, generation + 1) is E.REBALANCE_IN_PROGRESS
    assert h.commit_check(follower, generation) is E.ILLEGAL_GENERATION


def test_a_simple_commit_is_allowed_only_while_the_group_is_empty() -> None:
    h = GroupHarness()
    assert h.commit_check("", -1) is E.NONE
    assert h.commit_check("anyone", -1) is E.NONE  # Kafka does not look at the member then
    assert h.commit_check("someone", 1) is E.UNKNOWN_MEMBER_ID
    leader, follower, _ = h.stable_pair()
    h.leave(LeaveMember(leader), LeaveMember(follower))
    assert h.group.state == "Empty"
    assert h.commit_check("", -1) is E.NONE


def test_a_commit_renews_the_members_session() -> None:
    h = GroupHarness()
    leader, follower, generation = h.stable_pair()
    h.advance(9_000)
    h.heartbeat(leader, generation)
    assert h.commit_check(follower, generation) is E.NONE
    h.advance(9_000)
    assert h.group.member(follower) is not None


# --- views, deletion, unloading --------------------------------------------------------------


def test_describe_shows_assignments_only_while_stable() -> None:
    h = GroupHarness()
    leader, follower, _ = h.stable_pair()
    stable = h.group.describe()
    assert (stable.state, stable.protocol_type, stable.protocol_name) == (
        "Stable",
        "consumer",
        "range",
    )
    assert [(m.member_id, m.metadata, m.assignment) for m in stable.members] == [
        (leader, b"range-sub", b"A"),
        (follower, b"range-sub", b"B"),
    ]
    h.join(leader, client="a")
    preparing = h.group.describe()
    assert preparing.protocol_name == ""
    assert {m.assignment for m in preparing.members} == {b""}
    assert h.group.listing() == ("orders", "consumer", "PreparingRebalance")


def test_only_an_empty_group_can_be_deleted() -> None:
    h = GroupHarness()
    leader, follower, _ = h.stable_pair()
    assert h.group.delete() is E.NON_EMPTY_GROUP
    h.leave(LeaveMember(leader), LeaveMember(follower))
    assert h.group.delete() is E.NONE
    assert h.group.state == "Dead"
    assert h.group.delete() is E.GROUP_ID_NOT_FOUND
    assert h.joined(h.join(client="late")).error is E.COORDINATOR_NOT_AVAILABLE
    assert h.heartbeat(leader, 1) is E.COORDINATOR_NOT_AVAILABLE


def test_unloading_answers_every_parked_request_not_coordinator() -> None:
    joining, syncing = GroupHarness(), GroupHarness()
    leader, _, _ = joining.stable_pair()
    parked_join = joining.join(leader, client="a")
    leader, follower, generation = syncing.stable_pair()
    syncing.join(leader, client="a")
    syncing.join(follower, client="b")
    parked_sync = syncing.sync(follower, generation + 1)
    for h in (joining, syncing):
        h.group.unload()
        h.drain()
        assert h.group.state == "Dead"
        assert not h.group.members
        assert h.group.next_deadline() is None
    assert joining.joined(parked_join).error is E.NOT_COORDINATOR
    assert syncing.synced(parked_sync).error is E.NOT_COORDINATOR
