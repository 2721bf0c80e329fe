"""The value types of a classic group (``classic_group.py``): its states, its settings, the
requests it takes (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, an OffsetCommit's check) and
the answers and views it gives (DescribeGroups, ListGroups).

The fields are the Kafka messages' own, in Kafka's names, already decoded: the wire handlers
translate each version into these and back (a field a version lacks takes its Kafka default,
e.g. JoinGroup v0's rebalance timeout is its session timeout). Error numbers are Kafka's
(``GroupErrorCode``). Everything here is an immutable value; nothing does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from yak.protocol.kafka_errors import GroupErrorCode

__all__ = [
    "GroupDescription",
    "GroupListing",
    "GroupSettings",
    "GroupStateName",
    "Heartbeat",
    "JoinGroup",
    "JoinGroupResult",
    "JoinedMember",
    "LeaveGroupResult",
    "LeaveMember",
    "LeaveMemberResult",
    "MemberDescription",
    "Protocol",
    "Reply",
    "SyncGroup",
    "SyncGroupResult",
]


class GroupStateName(StrEnum):
    """A classic group's state, as Kafka names it (``ClassicGroupState``)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """The coordinator's group settings (Kafka's broker defaults)."""

    #: ``group.min.session.timeout.ms`` / ``group.max.session.timeout.ms``: a JoinGroup asking
    #: for a session timeout outside them is refused with INVALID_SESSION_TIMEOUT.
    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    #: ``group.initial.rebalance.delay.ms``: an Empty group's first rebalance waits this long
    #: for more members (extended per newcomer, up to the rebalance timeout); 0: no wait.
    initial_rebalance_delay_ms: int = 3_000
    #: ``group.max.size``: joins beyond it get GROUP_MAX_SIZE_REACHED.
    max_size: int = 1_000

    def __post_init__(self) -> None:
        if not 0 < self.min_session_timeout_ms <= self.max_session_timeout_ms:
            raise ValueError("session timeout bounds must be positive and ordered")
        if self.initial_rebalance_delay_ms < 0 or self.max_size < 1:
            raise ValueError("the initial delay must be >= 0 and the group size >= 1")


class Protocol(NamedTuple):
    """One assignor a member supports (``JoinGroupRequestProtocol``), in its order of
    preference: the name (``range``, ``cooperative-sticky`` …) and its subscription bytes."""

    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroup:
    """A JoinGroup request (v0-v9). ``request_id`` is the driver's handle for the answer,
    which may come later (``Reply``); ``fresh_id`` is a unique token the driver makes (a UUID)
    from which the machine names a new member (``<client_id>-<fresh_id>``, as Kafka does)."""

    request_id: int
    member_id: str
    protocol_type: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    #: v4+: a new member is first given its id with MEMBER_ID_REQUIRED, then joins with it.
    require_known_member_id: bool = True
    client_id: str = ""
    client_host: str = ""
    fresh_id: str = ""
    reason: str = ""


class JoinedMember(NamedTuple):
    """One member as the leader sees it in its JoinGroup answer: its subscription bytes for the
    protocol chosen."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    """A JoinGroup answer. ``members`` is filled for the leader only; ``skip_assignment``
    (v9+) tells a static leader that rejoined a Stable group not to assign again."""

    error: GroupErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroup:
    """A SyncGroup request (v0-v5); the leader's carries every member's assignment.
    ``protocol_type`` / ``protocol_name`` are v5's checks (None: not sent)."""

    request_id: int
    member_id: str
    generation_id: int
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    """A SyncGroup answer: the member's assignment bytes for this generation."""

    error: GroupErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


class Reply(NamedTuple):
    """An answer to a JoinGroup or SyncGroup that the driver is holding by ``request_id``."""

    request_id: int
    result: JoinGroupResult | SyncGroupResult


class Heartbeat(NamedTuple):
    """A Heartbeat request (v0-v4); also the identity an OffsetCommit is checked with."""

    member_id: str
    generation_id: int
    group_instance_id: str | None = None


class LeaveMember(NamedTuple):
    """One member leaving (LeaveGroup v3+ names several; v0-v2 one, by member id)."""

    member_id: str
    group_instance_id: str | None = None
    reason: str = ""


class LeaveMemberResult(NamedTuple):
    member_id: str
    group_instance_id: str | None
    error: GroupErrorCode


class LeaveGroupResult(NamedTuple):
    """The request's error and, when it is NONE, one result per member named."""

    error: GroupErrorCode
    members: tuple[LeaveMemberResult, ...] = ()


class MemberDescription(NamedTuple):
    """A member in DescribeGroups: metadata and assignment only while the group is Stable."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


class GroupDescription(NamedTuple):
    """DescribeGroups' view of one group (``protocol_name`` only while Stable, as Kafka)."""

    group_id: str
    state: GroupStateName
    protocol_type: str
    protocol_name: str
    members: tuple[MemberDescription, ...]


class GroupListing(NamedTuple):
    """ListGroups' view of one group."""

    group_id: str
    protocol_type: str
    state: GroupStateName
