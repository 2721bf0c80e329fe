"""``Leases``: the held members' leases kept alive off the request path, and idle members let go.

A member's keys live on its lease, whose TTL is the instance timeout. A request that uses the
member (``touch``) has the lease refreshed in the background, at most once per
``keepalive_s``; so does a request still under way at every ``tick`` (a long poll), so an idle
instance still expires after its timeout. A refresh that finds the lease expired drops the
member (its keys are gone); one that fails is tried again at the next use. A member without a
request for ``idle_s`` is let go (``let_go``: written behind, holder cleared). Single event
loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from yak.clock import Clock
from yak.errors import MetadataStoreError
from yak_rest_proxy.consume.holding.held import HeldMember, HeldMembers
from yak_rest_proxy.consume.holding.member_store import MemberStore
from yak_rest_proxy.consume.holding.tasks import BackgroundTasks

__all__ = ["Leases"]

log = logging.getLogger(__name__)


class Leases:
    """Lease refreshes and idle let-go of held members; see the module docstring."""

    def __init__(
        self,
        store: MemberStore,
        held: HeldMembers,
        tasks: BackgroundTasks,
        *,
        clock: Clock,
        keepalive_s: float,
        idle_s: float,
        let_go: Callable[[HeldMember], None],
    ) -> None:
        self._store = store
        self._held = held
        self._tasks = tasks
        self._clock = clock
        self.keepalive_s = keepalive_s
        self._idle_s = idle_s
        self._let_go = let_go

    def touch(self, held: HeldMember) -> None:
        """A request used the member: refresh its lease in the background if it is due."""
        now = self._clock.monotonic()
        held.used_at = now
        if now - held.alive_at >= self.keepalive_s:
            held.alive_at = now
            self._tasks.spawn(self._keep_alive(held))

    def tick(self, now: float) -> None:
        """Refresh the leases of members with requests under way; let idle ones go."""
        for held in self._held.all():
            if held.in_flight:
                self.touch(held)
            elif now - held.used_at >= self._idle_s and not held.releasing:
                self._let_go(held)

    async def _keep_alive(self, held: HeldMember) -> None:
        try:
            alive = await self._store.keep_alive(held.member.base.lease_id)
        except MetadataStoreError as exc:
            log.warning("consumer %s/%s: lease not refreshed: %s", *held.key, exc)
            held.alive_at = 0.0
            return
        if not alive:
            self._held.lose(held)  # expired: its keys are gone
