"""The members' protocol vote, and the group error numbers against an independent table
(``kio``'s, generated from Kafka's message schemas)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from yak.protocol.kafka_errors import GroupErrorCode
from yak_broker.kafka.groups.state.member import ClassicMember, common_protocols, select_protocol
from yak_broker.kafka.groups.state.records import JoinGroup, Protocol


def _member(name: str, *protocols: str) -> ClassicMember:
    request = JoinGroup(
        request_id=0,
        member_id=name,
        protocol_type="consumer",
        protocols=tuple(Protocol(p, p.encode()) for p in protocols),
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
    )
    return ClassicMember.joining(name, request, 0)


def test_each_member_votes_for_its_first_common_protocol() -> None:
    a = _member("a", "sticky", "roundrobin", "range")
    b = _member("b", "range", "roundrobin")
    c = _member("c", "roundrobin", "range", "sticky")
    assert common_protocols([a, b, c]) == {"roundrobin", "range"}
    # sticky is not common: a votes roundrobin, as c does; b votes range.
    assert select_protocol([a, b, c]) == "roundrobin"


def test_a_tie_goes_to_the_earliest_members_preference() -> None:
    a, b = _member("a", "roundrobin", "range"), _member("b", "range", "roundrobin")
    assert select_protocol([a, b]) == "roundrobin"
    assert select_protocol([b, a]) == "range"


def test_the_majority_wins_over_the_first_members_preference() -> None:
    members = [_member("a", "x", "y"), _member("b", "y", "x"), _member("c", "y", "x")]
    assert select_protocol(members) == "y"


def test_members_without_a_common_protocol_cannot_choose() -> None:
    with pytest.raises(ValueError, match="no common protocol"):
        select_protocol([_member("a", "x"), _member("b", "y")])
    assert common_protocols([]) is None


@pytest.mark.parametrize("code", list(GroupErrorCode))
def test_group_error_numbers_are_kafkas(code: GroupErrorCode) -> None:
    assert ErrorCode[code.name.lower()].value == code.value
