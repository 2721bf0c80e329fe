"""``HeldMember``: one consumer instance this proxy holds, and ``HeldMembers``, the table of
them by (group, member id).

A held member is the protocol's ``Member`` (replaced under ``lock`` by whoever changes it) and
the bookkeeping of the drivers around it: its group's watch, when a request last used it
(``used_at``) and when its lease was last refreshed (``alive_at``, monotonic seconds), requests
under way (``in_flight``), whether it was let go (``lost``: never held again; a new request
acquires it anew) or is being let go (``releasing``, to ``handing_to``), and when a write of
this proxy last stored its positions. Each entry holds one reference on its group's watch,
dropped when it is ``lose``-t. Single event loop.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field

from yak.errors import UnknownMemberIdError
from yak_rest_proxy.consume.holding.group_watch import GroupWatch
from yak_rest_proxy.consume.holding.group_watches import GroupWatches
from yak_rest_proxy.consume.membership.member_state import Member

__all__ = ["HeldMember", "HeldMembers", "MemberKey", "MemberLostError", "missing"]

MemberKey = tuple[str, str]


class MemberLostError(Exception):
    """The member went to another holder while a request was using it."""


@dataclass(eq=False)
class HeldMember:
    """One member this proxy holds (mutable; every change of ``member`` under ``lock``)."""

    member: Member
    watch: GroupWatch
    used_at: float
    alive_at: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    in_flight: int = 0
    lost: bool = False
    #: The proxy that asked for the member, once a handoff is due.
    handing_to: str | None = None
    releasing: bool = False
    #: When (monotonic) a write of this proxy last stored the member's positions: a commit or
    #: a seek writes them too, and the write-behind then skips the member for an interval.
    positions_written_at: float = -math.inf

    @property
    def key(self) -> MemberKey:
        return self.member.group, self.member.member_id


class HeldMembers:
    """The members this proxy holds; see the module docstring."""

    def __init__(self, watches: GroupWatches) -> None:
        self._watches = watches
        self._held: dict[MemberKey, HeldMember] = {}

    def get(self, group: str, member_id: str) -> HeldMember | None:
        return self._held.get((group, member_id))

    def all(self) -> list[HeldMember]:
        return list(self._held.values())

    def in_group(self, group: str) -> list[HeldMember]:
        return [held for (g, _), held in list(self._held.items()) if g == group]

    def put(self, held: HeldMember) -> None:
        """Hold ``held``, letting go of a former member of the same id (deleted: its watch
        has not said so yet)."""
        former = self._held.get(held.key)
        if former is not None:
            self.lose(former)
        self._held[held.key] = held

    def lose(self, held: HeldMember) -> None:
        """The member is no longer held here (its watch reference dropped); idempotent."""
        if held.lost:
            return
        held.lost = True
        if self._held.get(held.key) is held:
            del self._held[held.key]
        self._watches.close(held.key[0])


def missing(group: str, member_id: str) -> UnknownMemberIdError:
    return UnknownMemberIdError(
        f"consumer instance {member_id!r} not found in group {group!r} "
        "(it was deleted or expired after its instance timeout)",
        group=group,
        instance=member_id,
    )
