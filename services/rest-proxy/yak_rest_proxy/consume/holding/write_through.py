"""``WriteThrough``: a held member brought up to date and a decision applied to it, written to
etcd before anything is answered.

``converge`` (under the member's lock) first reconciles the member with the newest grant
(``member_protocol.reconcile``: the watch's when it is at least as new as the member's), then
applies ``decide``'s step. Every write is guarded by mod_revisions (``member_state.Write``); a
write that lost a race re-reads etcd (``refresh``) and both are decided again, up to
``ATTEMPTS`` times. A read that finds the member deleted answers ``UNKNOWN_MEMBER_ID``
(``missing``); one that finds another holder raises ``MemberLostError``; one that finds another
proxy asking for the member tells ``on_asked`` (the hand-over starts, once the lock is free).
Single event loop.
"""

from __future__ import annotations

from collections.abc import Callable

from yak.clock import Clock
from yak.errors import MetadataStoreError
from yak_rest_proxy.consume.holding.held import HeldMember, HeldMembers, MemberLostError, missing
from yak_rest_proxy.consume.holding.member_store import MemberStore
from yak_rest_proxy.consume.membership import member_protocol as protocol
from yak_rest_proxy.consume.membership.member_state import Grant, Member, Step

__all__ = ["ATTEMPTS", "WriteThrough"]

#: Writes (or reads) tried before a request gives up on a contended member.
ATTEMPTS = 20


class WriteThrough:
    """Guarded writes of held members; see the module docstring."""

    def __init__(
        self,
        store: MemberStore,
        held: HeldMembers,
        *,
        clock: Clock,
        holder: str,
        on_asked: Callable[[HeldMember, str], None],
    ) -> None:
        self._store = store
        self._held = held
        self._clock = clock
        self._holder = holder
        self._on_asked = on_asked

    async def write(self, step: Step) -> Member | None:
        """The member once ``step``'s write succeeded (None: a guard failed)."""
        if step.write is None:
            return step.member
        revision = await self._store.apply(step.write)
        return None if revision is None else protocol.settle(step, revision)

    async def converge(
        self, held: HeldMember, decide: Callable[[Member], Step], *, behind: bool = False
    ) -> Member:
        """Under ``held.lock``: reconcile with the newest grant, then ``decide``; a write that
        lost a race re-reads etcd and both are decided again. ``behind``: a write-behind,
        which does not count as this proxy's latest write of the positions."""
        if not held.watch.live:
            await self.refresh(held)
        for attempt in range(ATTEMPTS):
            if attempt:
                await self.refresh(held)
            now_ms = self._clock.time_ms()
            member = await self.write(protocol.reconcile(held.member, self.grant(held), now_ms))
            if member is None:
                continue
            held.member = member
            stored_at = member.positions_revision
            member = await self.write(decide(member))
            if member is None:
                continue
            held.member = member
            if member.positions_revision != stored_at and not behind:
                held.positions_written_at = self._clock.monotonic()
            return member
        raise MetadataStoreError(f"instance {held.member.member_id!r}: too many concurrent updates")

    async def refresh(self, held: HeldMember) -> None:
        """Re-read the member from etcd (after a lost race, or while its watch is down)."""
        group, member_id = held.key
        read = await self._store.read(group, member_id)
        if read is None:
            self._held.lose(held)
            raise missing(group, member_id)
        fresh = protocol.refresh(held.member, read)
        if fresh is None:
            self._held.lose(held)
            raise MemberLostError
        held.member = fresh
        if read.stored.wanted_by not in ("", self._holder):
            self._on_asked(held, read.stored.wanted_by)

    def grant(self, held: HeldMember) -> Grant:
        """The watch's grant when it is at least as new as the member's."""
        watch, member = held.watch, held.member
        if watch.live and watch.revision >= member.grant.as_of:
            return watch.grant(member.member_id)
        return member.grant

    def flush_step(self, member: Member) -> Step:
        """The write-behind decision: positions and due auto-commits (``protocol.flush``)."""
        return protocol.flush(member, self._clock.time_ms())
