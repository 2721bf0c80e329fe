"""``Handover``: a member passed between proxies — claimed by the one a request reaches, handed
over by the one holding it when asked, let go when idle or on stop (``member_protocol``,
"Holding").

- **Acquiring**: nobody holds the member (or this proxy does): claim it at once. Else ask its
  holder (``wanted_by``) and wait on the group's watch for the answer; a holder that leaves
  the request unanswered for ``handoff_timeout_s`` is taken over from what etcd holds (it
  died: the records polled since its last write are delivered again, at-least-once).
- **Kept in step by the watch** (``check``, after every change the group watch sees): a member
  deleted (lease expired, fenced by the coordinator, deleted through another proxy) or taken
  over is dropped without a write; one another proxy asked for is handed over.
- **Releasing** (in the background, under the member's lock): positions and due auto-commits
  written and ``holder :=`` the asker (``handing_to``, else nobody), guarded; a write that lost
  a race re-reads etcd and tries again. The member is lost to this proxy either way.

Single event loop.
"""

from __future__ import annotations

import functools
import logging
import math

from yak.clock import Clock
from yak.errors import MetadataStoreError, YakError
from yak.metadata.keyspace import validate_member_id
from yak.names import validate_group_id
from yak_rest_proxy.consume.holding.group_watch import GroupWatch
from yak_rest_proxy.consume.holding.group_watches import GroupWatches
from yak_rest_proxy.consume.holding.held import HeldMember, HeldMembers, MemberLostError, missing
from yak_rest_proxy.consume.holding.member_store import MemberStore
from yak_rest_proxy.consume.holding.tasks import BackgroundTasks
from yak_rest_proxy.consume.holding.write_through import ATTEMPTS, WriteThrough
from yak_rest_proxy.consume.membership import member_protocol as protocol
from yak_rest_proxy.consume.membership.member_state import Member

__all__ = ["Handover"]

log = logging.getLogger(__name__)


class Handover:
    """Claims and hands over held members; see the module docstring."""

    def __init__(
        self,
        store: MemberStore,
        held: HeldMembers,
        watches: GroupWatches,
        write_through: WriteThrough,
        tasks: BackgroundTasks,
        *,
        clock: Clock,
        holder: str,
        handoff_timeout_s: float,
    ) -> None:
        self._store = store
        self._held = held
        self._watches = watches
        self._through = write_through
        self._tasks = tasks
        self._clock = clock
        self._holder = holder
        self._handoff_timeout_s = handoff_timeout_s

    # -- taking a member -----------------------------------------------------------------------

    async def acquire(self, group: str, member_id: str) -> HeldMember:
        """Claim the member: at once if nobody holds it, else ask its holder and wait for the
        handoff, taking it over once the holder left the request unanswered too long."""
        validate_group_id(group)
        try:
            validate_member_id(member_id)
        except ValueError:
            raise missing(group, member_id) from None
        watch = self._watches.open(group)
        try:
            asked, asked_of, deadline = 0, "", 0.0
            for _ in range(ATTEMPTS):
                read = await self._store.read(group, member_id)
                if read is None:
                    raise missing(group, member_id)
                if read.stored.holder != asked_of:  # each holder gets its time to answer
                    asked_of = read.stored.holder
                    deadline = self._clock.monotonic() + self._handoff_timeout_s
                late = self._clock.monotonic() >= deadline
                if protocol.may_claim(read, self._holder, asked if late else 0):
                    step = protocol.claim(read, self._holder)
                    member = await self._through.write(step)
                    if member is not None:  # its lease is refreshed at the first use
                        return self.install(member, watch, alive_at=-math.inf)
                    asked = 0
                    continue
                if read.stored.revision != asked:
                    revision = await self._store.apply(protocol.ask(read, self._holder))
                    if revision is None:
                        continue
                    asked = revision
                left = max(0.0, deadline - self._clock.monotonic())
                await watch.wait(functools.partial(_changed_since, watch, member_id, asked), left)
            raise MetadataStoreError(f"instance {member_id!r}: could not take it over")
        except BaseException:
            self._watches.close(group)
            raise

    def install(self, member: Member, watch: GroupWatch, *, alive_at: float) -> HeldMember:
        """Hold ``member`` (its watch reference taken by the caller), and act on what its
        watch already saw of it."""
        held = HeldMember(member, watch, used_at=self._clock.monotonic(), alive_at=alive_at)
        self._held.put(held)
        self.check(held)
        return held

    # -- what the watch sees -------------------------------------------------------------------

    def on_change(self, group: str, member_id: str | None) -> None:
        """The group watch saw a change (of ``member_id``'s keys; None: any)."""
        if member_id is not None:
            held = self._held.get(group, member_id)
            if held is not None:
                self.check(held)
            return
        for held in self._held.in_group(group):
            self.check(held)

    def check(self, held: HeldMember) -> None:
        """Drop a member deleted or taken over; hand it over when another proxy asked."""
        seen, member = held.watch.seen(held.member.member_id), held.member
        if seen.member_revision == 0 and seen.member_changed > member.revision:
            self._held.lose(held)
        elif seen.positions_changed > member.positions_revision:
            stored = seen.positions
            if stored.revision == 0 or stored.holder != self._holder:
                self._held.lose(held)
            elif stored.wanted_by not in ("", self._holder):
                self.hand_off(held, stored.wanted_by)

    # -- letting go ----------------------------------------------------------------------------

    def hand_off(self, held: HeldMember, to: str) -> None:
        """Another proxy asked for the member: release it to ``to``."""
        held.handing_to = to
        self.let_go(held)

    def let_go(self, held: HeldMember) -> None:
        """Release the member in the background (to ``handing_to``, else nobody), unless that
        is under way."""
        if not held.releasing:
            self._tasks.spawn(self._release(held))

    async def _release(self, held: HeldMember) -> None:
        """Write the member behind and name its next holder (``handing_to``, else none)."""
        if held.releasing and held.handing_to is None:
            return
        held.releasing = True
        async with held.lock:
            seen = held.watch.seen(held.member.member_id)
            held.member = protocol.asked(held.member, seen.positions)  # no read to learn it
            for _ in range(ATTEMPTS):
                if held.lost:
                    return
                now_ms = self._clock.time_ms()
                write = protocol.release(held.member, now_ms, held.handing_to or "")
                try:
                    if await self._store.apply(write) is not None:
                        self._held.lose(held)
                        return
                    await self._through.refresh(held)
                    member = await self._through.write(
                        protocol.reconcile(held.member, self._through.grant(held), now_ms)
                    )
                    held.member = member or held.member
                except (MemberLostError, YakError) as exc:
                    log.info("consumer %s/%s not handed over: %s", *held.key, exc)
                    break
            self._held.lose(held)


def _changed_since(watch: GroupWatch, member_id: str, revision: int) -> bool:
    return watch.seen(member_id).changed > revision
