"""``WriteBehind``: a poll's outcome kept in memory, and the held members' positions and due
auto-commits written to etcd behind it.

A poll moves its member's positions in memory (``moved``); with ``interval_s`` 0 they are
written through before the poll answers. Otherwise every ``interval_s`` (``tick``) each member
whose memory is ahead of etcd (``Member.dirty``) is written (``member_protocol.flush``, guarded
like every write), except a member whose positions a commit or a seek of this proxy stored
within the last interval: it waits for the next round, so a consumer committing every second
costs one etcd write a second, not two. A position is at most two intervals old in etcd. A
crash loses what was not yet written: the next holder delivers those records again
(at-least-once). Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from yak.errors import YakError
from yak_rest_proxy.consume.holding.held import HeldMember, HeldMembers, MemberLostError
from yak_rest_proxy.consume.holding.write_through import WriteThrough
from yak_rest_proxy.consume.membership.member_state import Member

__all__ = ["WriteBehind"]

log = logging.getLogger(__name__)


class WriteBehind:
    """Positions written behind; see the module docstring."""

    def __init__(self, held: HeldMembers, write_through: WriteThrough, *, interval_s: float):
        self._held = held
        self._through = write_through
        self.interval_s = interval_s
        self._next = 0.0

    def start(self, now: float) -> None:
        """The first round is due one interval after ``now``."""
        self._next = now + self.interval_s

    async def moved(self, held: HeldMember, change: Callable[[Member], Member]) -> Member | None:
        """Apply ``change`` (a poll's outcome) in memory; None if the member left meanwhile
        (another holder delivers those records again)."""
        async with held.lock:
            if held.lost:
                return None
            held.member = change(held.member)
            if self.interval_s <= 0:  # written through: before the poll answers
                with contextlib.suppress(MemberLostError):
                    await self._through.converge(held, self._through.flush_step)
            return held.member

    async def tick(self, now: float) -> None:
        """Write every dirty member, once a round is due."""
        if self.interval_s <= 0 or now < self._next:
            return
        self._next = now + self.interval_s
        written = now - self.interval_s
        dirty = [
            h
            for h in self._held.all()
            if h.member.dirty and not h.releasing and h.positions_written_at <= written
        ]
        results = await asyncio.gather(*(self._flush(h) for h in dirty), return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):
                log.error("consumer positions not written", exc_info=result)

    async def _flush(self, held: HeldMember) -> None:
        async with held.lock:
            if held.lost or not held.member.dirty:
                return
            try:
                await self._through.converge(held, self._through.flush_step, behind=True)
            except (MemberLostError, YakError) as exc:
                log.info("consumer %s/%s: positions not written: %s", *held.key, exc)
