"""ClassicGroup scenario by scenario: joins and rounds, syncs, heartbeats and sessions, the
rebalance and sync timeouts, leaves, protocol checks (static members, commits, views and
deletion: ``test_classic_group_static.py``)."""

from __future__ import annotations

from tests.unit.broker.kafka.groups.state.support import (
    RANGE,
    REBALANCE_MS,
    SESSION_MS,
    E,
    GroupHarness,
)
from yak_broker.kafka.groups.state.records import GroupSettings, JoinedMember, LeaveMember, Protocol

# --- joining -------------------------------------------------------------------------------


def test_a_first_join_from_v4_reserves_a_member_id_and_the_second_completes_the_round() -> None:
    h = GroupHarness()
    first = h.joined(h.join(client="app"))
    assert first.error is E.MEMBER_ID_REQUIRED
    assert first.member_id == "app-f0"
    assert h.group.state == "Empty"
    assert not h.group.members

    result = h.joined(h.join(first.member_id, client="app"))
    assert result.error is E.NONE
    assert (result.member_id, result.generation_id, result.leader) == ("app-f0", 1, "app-f0")
    assert (result.protocol_type, result.protocol_name) == ("consumer", "range")
    assert result.members == (JoinedMember("app-f0", None, b"range-sub"),)
    assert h.group.state == "CompletingRebalance"


def test_a_join_before_v4_is_given_its_id_and_joins_at_once() -> None:
    h = GroupHarness()
    result = h.joined(h.join(client="old", v4=False))
    assert (result.error, result.member_id, result.generation_id) == (E.NONE, "old-f0", 1)


def test_two_members_joining_in_one_round_share_a_generation_and_the_first_leads() -> None:
    h = GroupHarness(GroupSettings(1_000, 60_000, initial_rebalance_delay_ms=3_000))
    a = h.join(client="a", v4=False)
    h.advance(1_000)
    b = h.join(client="b", v4=False)
    assert h.join_result(a) is None
    assert h.join_result(b) is None
    assert h.group.next_deadline() == h.now + 3_000  # extended by the newcomer

    h.advance(3_000)
    leader, follower = h.joined(a), h.joined(b)
    assert leader.generation_id == follower.generation_id == 1
    assert leader.leader == follower.leader == leader.member_id
    assert [m.member_id for m in leader.members] == [leader.member_id, follower.member_id]
    assert follower.members == ()


def test_a_member_joining_a_stable_group_makes_everyone_rejoin() -> None:
    h = GroupHarness()
    leader, follower, generation = h.stable_pair()
    newcomer = h.new_member("c")
    assert h.group.state == "PreparingRebalance"
    assert h.join_result(newcomer) is None
    assert h.heartbeat(leader, generation) is E.REBALANCE_IN_PROGRESS

    rejoins = [h.join(leader, client="a"), h.join(follower, client="b")]
    results = [h.joined(r) for r in [*rejoins, newcomer]]
    assert {r.generation_id for r in results} == {generation + 1}
    assert [r.leader for r in results] == [leader] * 3
    assert len(results[0].members) == 3


def test_a_follower_rejoining_a_stable_group_unchanged_gets_the_generation_again() -> None:
    h = GroupHarness()
    leader, follower, generation = h.stable_pair()
    again = h.joined(h.join(follower, client="b"))
    assert (again.error, again.generation_id, again.leader) == (E.NONE, generation, leader)
    assert h.group.state == "Stable"


def test_a_changed_subscription_starts_a_round() -> None:
    h = GroupHarness()
    _, follower, _ = h.stable_pair()
    h.join(follower, client="b", protocols=(Protocol("range", b"new-topics"),))
    assert h.group.state == "PreparingRebalance"


# --- syncing -------------------------------------------------------------------------------


def test_a_followers_sync_waits_for_the_leaders_which_answers_both() -> None:
    h = GroupHarness()
    a = h.new_member("a")
    b = h.new_member("b")  # a new round: a, CompletingRebalance, has to rejoin
    assert h.joined(a).generation_id == 1
    assert h.join_result(b) is None
    a_again = h.joined(h.join(h.joined(a).member_id, client="a"))
    leader, follower = a_again, h.joined(b)
    assert leader.generation_id == follower.generation_id == 2

    follower_sync = h.sync(follower.member_id, 2)
    assert follower_sync not in h.answers
    leader_sync = h.sync(leader.member_id, 2, {leader.member_id: b"A", follower.member_id: b"B"})
    assert h.synced(leader_sync).assignment == b"A"
    assert h.synced(follower_sync).assignment == b"B"
    assert h.synced(follower_sync).protocol_name == "range"
    assert h.group.state == "Stable"


def test_a_member_the_leader_left_out_gets_an_empty_assignment() -> None:
    h = GroupHarness()
    leader, follower, generation = h.stable_pair()
    h.join(leader, client="a")
    h.join(follower, client="b")
    h.sync(leader, generation + 1, {leader: b"all"})
    assert h.synced(h.sync(follower, generation + 1)).assignment == b""


def test_a_sync_of_another_generation_or_during_the_join_phase_is_refused() -> None:
    h = GroupHarness()
    leader, follower, generation = h.stable_pair()
    assert h.synced(h.sync(follower, generation - 1)).error is E.ILLEGAL_GENERATION
    assert h.synced(h.sync("nobody", generation)).error is E.UNKNOWN_MEMBER_ID
    wrong = h.sync(follower, generation, protocol_name="roundrobin")
    assert h.synced(wrong).error is E.INCONSISTENT_GROUP_PROTOCOL
    h.join(leader, client="a")
    assert h.synced(h.sync(follower, generation)).error is E.REBALANCE_IN_PROGRESS


def test_a_leader_that_never_syncs_is_removed_and_the_parked_followers_told_to_rejoin() -> None:
    h = GroupHarness()
    leader, follower, generation = h.stable_pair()
    h.join(leader, client="a")
    h.join(follower, client="b", session_ms=60_000)  # outlives the sync timeout
    parked = h.sync(follower, generation + 1)
    h.advance(REBALANCE_MS)
    assert h.synced(parked).error is E.REBALANCE_IN_PROGRESS
    assert h.group.member(leader) is None
    assert h.group.state == "PreparingRebalance"


# --- sessions and timeouts -----------------------------------------------------------------


def test_a_member_whose_session_ends_is_removed_and_the_group_rebalances() -> None:
    h = GroupHarness()
    leader, follower, generation = h.stable_pair()
    for _ in range(4):
        h.advance(SESSION_MS // 3)
        if h.group.state == "Stable":
            assert h.heartbeat(leader, generation) is E.NONE
    assert h.group.member(follower) is None
    assert h.heartbeat(leader, generation) is E.REBALANCE_IN_PROGRESS
    alone = h.joined(h.join(leader, client="a"))
    assert (alone.generation_id, [m.member_id for m in alone.members]) == (
        generation + 1,
        [leader],
    )


def test_the_rebalance_timeout_evicts_the_member_that_did_not_rejoin() -> None:
    h = GroupHarness()
    leader, laggard, generation = h.stable_pair()
    newcomer = h.new_member("c")
    leader_join = h.join(leader, client="a")
    for _ in range(REBALANCE_MS // 5_000 - 1):
        h.advance(5_000)
        # The laggard's heartbeats keep its session but it never rejoins.
        assert h.heartbeat(laggard, generation) is E.REBALANCE_IN_PROGRESS
    assert h.join_result(leader_join) is None
    h.advance(5_000)
    assert h.group.member(laggard) is None
    assert h.joined(leader_join).generation_id == generation + 1
    assert [m.member_id for m in h.joined(leader_join).members] == [
        leader,
        h.joined(newcomer).member_id,
    ]
    assert h.heartbeat(laggard, generation) is E.UNKNOWN_MEMBER_ID


def test_a_parked_join_does_not_let_its_session_end() -> None:
    h = GroupHarness()
    leader, follower, _ = h.stable_pair()
    parked = h.join(leader, client="a")
    h.advance(SESSION_MS + 1)  # the follower's session ends; the leader's join is parked
    assert h.group.member(follower) is None
    assert h.joined(parked).error is E.NONE


def test_next_deadline_is_the_earliest_timer() -> None:
    h = GroupHarness()
    leader, follower, generation = h.stable_pair()
    start = h.now
    h.advance(1_000)
    h.heartbeat(leader, generation)
    assert h.group.next_deadline() == start + SESSION_MS  # the follower's session
    h.join(follower, client="b", protocols=(Protocol("range", b"x"),))
    # The follower's join is parked (its session stops); the leader's session comes first.
    assert h.group.next_deadline() == h.now + SESSION_MS


def test_a_reserved_member_id_holds_the_round_until_it_lapses() -> None:
    h = GroupHarness()
    leader, follower, generation = h.stable_pair()
    h.joined(h.join(client="late"))  # MEMBER_ID_REQUIRED, never comes back
    rejoins = [h.join(leader, client="a"), h.join(follower, client="b")]
    assert all(h.join_result(r) is None for r in rejoins)
    h.advance(SESSION_MS)
    assert [h.joined(r).generation_id for r in rejoins] == [generation + 1] * 2


# --- leaving -------------------------------------------------------------------------------


def test_when_the_leader_leaves_the_next_member_leads_the_next_generation() -> None:
    h = GroupHarness()
    leader, follower, generation = h.stable_pair()
    result = h.leave(LeaveMember(leader))
    assert result.error is E.NONE
    assert result.members[0].error is E.NONE
    assert h.group.state == "PreparingRebalance"
    assert h.group.leader_id == follower
    alone = h.joined(h.join(follower, client="b"))
    assert (alone.leader, alone.generation_id) == (follower, generation + 1)


def test_a_batch_leave_answers_each_member_and_the_last_leave_empties_the_group() -> None:
    h = GroupHarness()
    leader, follower, generation = h.stable_pair()
    result = h.leave(LeaveMember(leader), LeaveMember("ghost"), LeaveMember(follower))
    assert [m.error for m in result.members] == [E.NONE, E.UNKNOWN_MEMBER_ID, E.NONE]
    assert h.group.state == "Empty"
    assert h.group.generation_id == generation + 1
    assert h.group.leader_id is None
    assert h.group.protocol_type == "consumer"


def test_a_member_leaving_with_its_join_parked_gets_unknown_member_id() -> None:
    h = GroupHarness()
    leader, _follower, _ = h.stable_pair()
    parked = h.join(leader, client="a")
    h.leave(LeaveMember(leader))
    assert h.joined(parked).error is E.UNKNOWN_MEMBER_ID


# --- protocols and admission ---------------------------------------------------------------


def test_a_join_with_no_protocol_in_common_is_inconsistent() -> None:
    h = GroupHarness()
    h.stable_pair()
    rr = (Protocol("roundrobin", b""),)
    assert h.joined(h.join(client="x", protocols=rr)).error is E.INCONSISTENT_GROUP_PROTOCOL
    other_type = h.joined(h.join(client="y", protocol_type="connect"))
    assert other_type.error is E.INCONSISTENT_GROUP_PROTOCOL
    assert h.joined(h.join(client="z", protocols=())).error is E.INCONSISTENT_GROUP_PROTOCOL
    assert h.group.state == "Stable"


def test_the_members_vote_picks_the_protocol() -> None:
    h = GroupHarness(GroupSettings(1_000, 60_000, initial_rebalance_delay_ms=100))
    rr, rng, sticky = Protocol("roundrobin", b"1"), Protocol("range", b"2"), Protocol("s", b"3")
    joins = [
        h.join(client="a", protocols=(sticky, rr, rng), v4=False),
        h.join(client="b", protocols=(rng, rr), v4=False),
        h.join(client="c", protocols=(rng, rr, sticky), v4=False),
    ]
    h.advance(100)
    assert {h.joined(j).protocol_name for j in joins} == {"range"}
    assert h.joined(joins[0]).members[1].metadata == b"2"


def test_session_timeouts_outside_the_bounds_and_a_full_group_are_refused() -> None:
    h = GroupHarness(GroupSettings(1_000, 60_000, initial_rebalance_delay_ms=0, max_size=1))
    assert h.joined(h.join(session_ms=999)).error is E.INVALID_SESSION_TIMEOUT
    assert h.joined(h.join(session_ms=60_001)).error is E.INVALID_SESSION_TIMEOUT
    h.joined(h.join(client="a", v4=False))
    assert h.joined(h.join(client="b", protocols=RANGE)).error is E.GROUP_MAX_SIZE_REACHED


def test_an_unknown_member_id_is_refused() -> None:
    h = GroupHarness()
    h.stable_pair()
    assert h.joined(h.join("c-forged")).error is E.UNKNOWN_MEMBER_ID
