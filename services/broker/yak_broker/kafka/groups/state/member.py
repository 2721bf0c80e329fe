"""``ClassicMember``: one member of a classic group as its coordinator holds it, and the choice
of the group's protocol by the members' votes (Kafka's ``ClassicGroup.selectProtocol``).

A member is mutable and owned by its ``ClassicGroup``: its protocols and timeouts (from its
latest JoinGroup), the JoinGroup or SyncGroup of its that is parked until the round completes
(by the driver's request id), its session deadline, and its assignment with the generation it
was handed out in. Pure: no clock, no I/O; not thread-safe.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from yak_broker.kafka.groups.state.records import (
    JoinedMember,
    JoinGroup,
    MemberDescription,
    Protocol,
)

__all__ = ["ClassicMember", "common_protocols", "select_protocol"]


@dataclass(slots=True, eq=False)
class ClassicMember:
    """See the module doc."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    protocol_type: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    #: The session ends at this time unless a heartbeat (or join, sync, commit) renews it;
    #: it does not run while a JoinGroup or SyncGroup of the member is parked.
    session_deadline_ms: int
    #: The parked JoinGroup's request id (the member is "awaiting join").
    join_request: int | None = None
    #: The parked SyncGroup's request id (the member is "awaiting sync").
    sync_request: int | None = None
    assignment: bytes = b""
    #: The generation ``assignment`` was handed out in (-1: none yet).
    assignment_generation: int = -1

    @classmethod
    def joining(cls, member_id: str, request: JoinGroup, now_ms: int) -> ClassicMember:
        return cls(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_deadline_ms=now_ms + request.session_timeout_ms,
            join_request=request.request_id,
        )

    @property
    def parked(self) -> bool:
        """Whether a JoinGroup or SyncGroup of the member waits for the round."""
        return self.join_request is not None or self.sync_request is not None

    def update(self, request: JoinGroup) -> None:
        """Take a rejoin's protocols, timeouts and client identity."""
        self.protocols = request.protocols
        self.session_timeout_ms = request.session_timeout_ms
        self.rebalance_timeout_ms = request.rebalance_timeout_ms
        self.client_id = request.client_id
        self.client_host = request.client_host

    def renew(self, now_ms: int) -> None:
        self.session_deadline_ms = now_ms + self.session_timeout_ms

    def same_protocols(self, protocols: Sequence[Protocol]) -> bool:
        return self.protocols == tuple(protocols)

    def metadata(self, protocol_name: str) -> bytes:
        for protocol in self.protocols:
            if protocol.name == protocol_name:
                return protocol.metadata
        return b""

    def joined_view(self, protocol_name: str) -> JoinedMember:
        return JoinedMember(self.member_id, self.group_instance_id, self.metadata(protocol_name))

    def description(self, protocol_name: str | None) -> MemberDescription:
        """DescribeGroups' view: metadata and assignment only when a protocol is given."""
        metadata = b"" if protocol_name is None else self.metadata(protocol_name)
        assignment = b"" if protocol_name is None else self.assignment
        return MemberDescription(
            self.member_id,
            self.group_instance_id,
            self.client_id,
            self.client_host,
            metadata,
            assignment,
        )


def common_protocols(members: Iterable[ClassicMember]) -> set[str] | None:
    """The protocol names every member supports (None when there is no member)."""
    common: set[str] | None = None
    for member in members:
        names = {p.name for p in member.protocols}
        common = names if common is None else common & names
    return common


def select_protocol(members: Sequence[ClassicMember]) -> str:
    """Kafka's vote: among the protocols every member supports, each member votes for the first
    in its own order of preference; the most votes win, ties going to the one the earliest
    member prefers. Raises ValueError when the members share no protocol (the joins that could
    cause it are refused with INCONSISTENT_GROUP_PROTOCOL first)."""
    candidates = common_protocols(members)
    if not candidates:
        raise ValueError("the members support no common protocol")
    votes: Counter[str] = Counter()
    for member in members:
        votes[next(p.name for p in member.protocols if p.name in candidates)] += 1
    best = max(votes.values())
    first_preference = [p.name for p in members[0].protocols]
    return min((name for name, count in votes.items() if count == best), key=first_preference.index)
