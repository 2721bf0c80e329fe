"""``Roster``: who is in a classic group — its members in join order, the leader, the static
members by ``group.instance.id``, and the member ids handed out with MEMBER_ID_REQUIRED that
have not come back yet.

Invariants: the leader is a member, or None exactly when there is no member; every static
member is found by its instance id and no other member is. Owned by one ``ClassicGroup``, which
decides when members come and go (the roster answers no request). Pure; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterator

from yak.protocol.kafka_errors import GroupErrorCode
from yak_broker.kafka.groups.state.member import ClassicMember

__all__ = ["Roster"]


class Roster:
    """See the module doc."""

    def __init__(self) -> None:
        self.leader_id: str | None = None
        #: Member ids handed out with MEMBER_ID_REQUIRED → when the reservation lapses (ms).
        self.reserved: dict[str, int] = {}
        self._members: dict[str, ClassicMember] = {}
        #: group.instance.id → its member id.
        self._static: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._members)

    def __iter__(self) -> Iterator[ClassicMember]:
        return iter(self._members.values())

    def __contains__(self, member_id: object) -> bool:
        return member_id in self._members

    def get(self, member_id: str) -> ClassicMember | None:
        return self._members.get(member_id)

    def static_member(self, instance: str | None) -> ClassicMember | None:
        member_id = None if instance is None else self._static.get(instance)
        return None if member_id is None else self._members[member_id]

    def is_leader(self, member: ClassicMember) -> bool:
        return member.member_id == self.leader_id

    def add(self, member: ClassicMember) -> None:
        """A new member, last in join order; the first one leads."""
        self._members[member.member_id] = member
        if member.group_instance_id is not None:
            self._static[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member: ClassicMember) -> None:
        """Take the member out; if it led, the earliest remaining member leads."""
        del self._members[member.member_id]
        if member.group_instance_id is not None:
            self._static.pop(member.group_instance_id, None)
        if self.leader_id == member.member_id:
            self.leader_id = next(iter(self._members), None)

    def rename(self, member: ClassicMember, new_id: str) -> None:
        """A static member's new id takes the old one's place (its order and leadership)."""
        old_id = member.member_id
        member.member_id = new_id
        self._members = {(new_id if k == old_id else k): m for k, m in self._members.items()}
        if member.group_instance_id is not None:
            self._static[member.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id

    def member_error(self, member_id: str, instance: str | None) -> GroupErrorCode | None:
        """Kafka's member validation: a static member must use its instance's current id
        (FENCED_INSTANCE_ID), anyone else must be a member (UNKNOWN_MEMBER_ID)."""
        if instance is not None:
            current = self._static.get(instance)
            if current is None:
                return GroupErrorCode.UNKNOWN_MEMBER_ID
            return None if current == member_id else GroupErrorCode.FENCED_INSTANCE_ID
        return None if member_id in self._members else GroupErrorCode.UNKNOWN_MEMBER_ID

    def clear(self) -> None:
        self._members.clear()
        self._static.clear()
        self.reserved.clear()
        self.leader_id = None
