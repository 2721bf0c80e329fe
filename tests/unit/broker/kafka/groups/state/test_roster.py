"""Roster: join order, leader succession, static members' renames and Kafka's member checks."""

from __future__ import annotations

from tests.unit.broker.kafka.groups.state.support import RANGE, E
from yak_broker.kafka.groups.state.member import ClassicMember
from yak_broker.kafka.groups.state.records import JoinGroup
from yak_broker.kafka.groups.state.roster import Roster


def _member(member_id: str, instance: str | None = None) -> ClassicMember:
    request = JoinGroup(0, member_id, "consumer", RANGE, 10_000, 10_000, instance)
    return ClassicMember.joining(member_id, request, 0)


def _leader(roster: Roster) -> str | None:
    return roster.leader_id


def test_the_first_member_leads_and_the_earliest_remaining_succeeds_it() -> None:
    roster = Roster()
    a, b, c = _member("a"), _member("b"), _member("c")
    for member in (a, b, c):
        roster.add(member)
    assert roster.leader_id == "a"
    roster.remove(b)
    assert roster.leader_id == "a"
    roster.remove(a)
    assert roster.leader_id == "c"
    roster.remove(c)
    assert _leader(roster) is None
    assert len(roster) == 0


def test_a_renamed_static_member_keeps_its_place_and_its_leadership() -> None:
    roster = Roster()
    s, b = _member("s-1", "i"), _member("b")
    roster.add(s)
    roster.add(b)
    roster.rename(s, "s-2")
    assert [m.member_id for m in roster] == ["s-2", "b"]
    assert roster.leader_id == "s-2"
    assert roster.static_member("i") is s
    assert "s-1" not in roster
    assert roster.get("s-2") is s


def test_member_checks_follow_kafka() -> None:
    roster = Roster()
    roster.add(_member("s-1", "i"))
    roster.add(_member("d"))
    assert roster.member_error("s-1", "i") is None
    assert roster.member_error("s-0", "i") is E.FENCED_INSTANCE_ID
    assert roster.member_error("s-1", "other") is E.UNKNOWN_MEMBER_ID
    assert roster.member_error("d", None) is None
    assert roster.member_error("x", None) is E.UNKNOWN_MEMBER_ID
    roster.clear()
    assert roster.static_member("i") is None
    assert roster.member_error("d", None) is E.UNKNOWN_MEMBER_ID
