"""``Members``: the consumer instances this proxy holds, in memory, kept in step with etcd — the
one interface the consumer operations (``consume.consumer``) use.

The first request for an instance makes this proxy its *holder* (``member_protocol``,
"Holding"); from then on no etcd call is on the poll path: the member, its positions and its
group's state are in memory. The parts, each its own module:

- ``handover``: claiming a member from the proxy that holds it, handing it over when another
  one asks, letting it go when idle or on ``stop``; kept in step by the group's watch;
- ``write_through``: a decision (commit, seek, subscription, rebalance) written before it is
  answered, guarded by mod_revisions, re-decided on a lost race;
- ``write_behind``: a poll's positions in memory, written every ``flush_interval_s``;
- ``leases``: lease refreshes off the request path, idle members let go after ``idle_s``;
- ``group_watches``: one watch per group with held members; ``held``: the table of them.

A request reaches a member through ``run``/``current`` (reconcile, then a decision) or, for a
poll, through one ``MemberSession`` (``serving``): the member as it stands, a wait for its
group's next state, and the poll's outcome recorded — its lease kept alive until the session
ends. Concurrent requests for one member acquire it once (``_Turn``) and take turns on its
lock. While a group's watch is down, every request re-reads etcd first.

A crash loses what was not yet written behind: the records polled since the last write are
delivered again by the next holder (at-least-once); a commit, once answered, is in etcd. A
client sending requests for one instance to several proxies at once gets them served in turn,
each switch a handoff (a few etcd round trips). Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from yak.clock import Clock
from yak.errors import MetadataStoreError, YakError
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import GroupMember
from yak.metadata.store import MetadataStore
from yak.names import validate_group_id
from yak_rest_proxy.consume.holding.group_watches import GroupWatches
from yak_rest_proxy.consume.holding.handover import Handover
from yak_rest_proxy.consume.holding.held import HeldMember, HeldMembers, MemberKey, MemberLostError
from yak_rest_proxy.consume.holding.leases import Leases
from yak_rest_proxy.consume.holding.member_store import MemberStore
from yak_rest_proxy.consume.holding.tasks import BackgroundTasks
from yak_rest_proxy.consume.holding.write_behind import WriteBehind
from yak_rest_proxy.consume.holding.write_through import ATTEMPTS, WriteThrough
from yak_rest_proxy.consume.membership import member_protocol as protocol
from yak_rest_proxy.consume.membership.member_state import Member, Step

__all__ = ["MemberSession", "Members"]

_STOP_TIMEOUT_S = 5.0


@dataclass(eq=False)
class _Turn:
    """Requests waiting to acquire one member."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: int = 0


class Members:
    """The instances this proxy holds; see the module docstring."""

    def __init__(
        self,
        store: MemberStore,
        metadata: MetadataStore,
        keyspace: Keyspace,
        *,
        clock: Clock,
        holder: str,
        flush_interval_s: float = 1.0,
        handoff_timeout_s: float = 2.0,
        keepalive_s: float = 1.0,
        idle_s: float = 60.0,
    ) -> None:
        self._store = store
        self._clock = clock
        self.holder = holder
        self._tasks = BackgroundTasks()
        self._watches = GroupWatches(
            metadata,
            keyspace,
            clock=clock,
            tasks=self._tasks,
            listener=lambda group, member_id: self._handover.on_change(group, member_id),
        )
        self._held = HeldMembers(self._watches)
        self._through = WriteThrough(
            store,
            self._held,
            clock=clock,
            holder=holder,
            on_asked=lambda held, to: self._handover.hand_off(held, to),
        )
        self._handover = Handover(
            store,
            self._held,
            self._watches,
            self._through,
            self._tasks,
            clock=clock,
            holder=holder,
            handoff_timeout_s=handoff_timeout_s,
        )
        self._leases = Leases(
            store,
            self._held,
            self._tasks,
            clock=clock,
            keepalive_s=keepalive_s,
            idle_s=idle_s,
            let_go=self._handover.let_go,
        )
        self._behind = WriteBehind(self._held, self._through, interval_s=flush_interval_s)
        self._acquiring: dict[MemberKey, _Turn] = {}
        self._loop: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the background work: writes behind, lease refreshes, letting idle ones go."""
        if self._loop is None:
            started = self._clock.monotonic()
            self._loop = asyncio.get_running_loop().create_task(self._background(started))

    async def stop(self) -> None:
        """Let every held member go (written behind, holder cleared), then stop."""
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.cancel()
            await asyncio.gather(loop, return_exceptions=True)
        for held in self._held.all():
            self._handover.let_go(held)
        await self._tasks.drain(_STOP_TIMEOUT_S)
        await self._watches.stop()

    # -- what requests do ---------------------------------------------------------------------

    async def create(self, group: str, record: GroupMember, timeout_ms: int) -> Member:
        """Create the member, held here from the start."""
        validate_group_id(group)
        watch = self._watches.open(group)
        try:
            read = await self._store.create(group, record, timeout_ms, self.holder)
        except BaseException:
            self._watches.close(group)
            raise
        now = self._clock.monotonic()
        return self._handover.install(protocol.adopt(read, self.holder), watch, alive_at=now).member

    async def current(self, group: str, member_id: str) -> Member:
        """The member with its assignment brought up to date (``reconcile``)."""
        return await self.run(group, member_id, Step)

    async def run(self, group: str, member_id: str, decide: Callable[[Member], Step]) -> Member:
        """Reconcile, then apply ``decide``'s step (written through if it writes)."""
        for _ in range(ATTEMPTS):
            held = await self._get(group, member_id)
            async with held.lock:
                if held.lost:
                    continue
                try:
                    return await self._through.converge(held, decide)
                except MemberLostError:
                    continue
        raise MetadataStoreError(f"instance {member_id!r}: held elsewhere again and again")

    async def update(
        self, group: str, member_id: str, change: Callable[[Member], Member]
    ) -> Member | None:
        """Apply ``change`` (a poll's outcome) in memory; None if the member left meanwhile
        (another holder delivers those records again)."""
        held = self._held.get(group, member_id)
        if held is None:
            return None
        return await self._behind.moved(held, change)

    async def leave(self, group: str, member_id: str) -> None:
        """Delete the member, auto-committing its positions first (as a closing consumer)."""
        member = await self.current(group, member_id)
        if member.auto_commit:
            with contextlib.suppress(YakError):
                now_ms = self._clock.time_ms()
                member = await self.run(
                    group, member_id, lambda m: protocol.commit(m, None, now_ms)
                )
        held = self._held.get(group, member_id)
        if held is not None:
            async with held.lock:
                await self._store.apply(protocol.leave(held.member))
                self._held.lose(held)
        else:
            await self._store.apply(protocol.leave(member))
        await self._store.revoke(member.base.lease_id)

    async def wait_for_state(self, member: Member, timeout_s: float) -> None:
        """Until the group's state differs from the one ``member`` was reconciled with (its
        watch), or the timeout."""
        held = self._held.get(member.group, member.member_id)
        if held is None or timeout_s <= 0:
            return
        watch, grant = held.watch, member.grant

        def changed() -> bool:
            return (
                watch.live
                and watch.revision >= grant.as_of
                and (watch.state_revision != grant.revision)
            )

        await watch.wait(changed, timeout_s)

    @asynccontextmanager
    async def serving(self, group: str, member_id: str) -> AsyncIterator[MemberSession]:
        """A request for the member is under way: its lease is kept alive until it ends."""
        held = await self._get(group, member_id)
        held.in_flight += 1
        try:
            yield MemberSession(self, group, member_id)
        finally:
            held.in_flight -= 1
            self._leases.touch(held)

    # -- holding ------------------------------------------------------------------------------

    async def _get(self, group: str, member_id: str) -> HeldMember:
        key = (group, member_id)
        held = self._held.get(group, member_id)
        if held is None or held.lost:
            # One acquisition per member at a time: concurrent requests wait for it.
            turn = self._acquiring.setdefault(key, _Turn())
            turn.waiting += 1
            try:
                async with turn.lock:
                    held = self._held.get(group, member_id)
                    if held is None or held.lost:
                        held = await self._handover.acquire(group, member_id)
            finally:
                turn.waiting -= 1
                if not turn.waiting:
                    del self._acquiring[key]
        self._leases.touch(held)
        return held

    async def _background(self, started: float) -> None:
        tick = self._leases.keepalive_s
        if self._behind.interval_s > 0:
            tick = min(tick, self._behind.interval_s)
        next_tick = started
        self._behind.start(started)
        while True:
            next_tick = max(next_tick + tick, self._clock.monotonic())
            await self._clock.sleep(next_tick - self._clock.monotonic())
            now = self._clock.monotonic()
            self._leases.tick(now)
            await self._behind.tick(now)


class MemberSession:
    """One request's use of a member (``Members.serving``): the poll path's interface to it."""

    def __init__(self, members: Members, group: str, member_id: str) -> None:
        self._members = members
        self.group = group
        self.member_id = member_id

    async def current(self) -> Member:
        """The member with its assignment brought up to date."""
        return await self._members.current(self.group, self.member_id)

    async def wait_for_state(self, member: Member, timeout_s: float) -> None:
        """Until the group's state differs from ``member``'s, or the timeout."""
        await self._members.wait_for_state(member, timeout_s)

    async def moved(self, change: Callable[[Member], Member]) -> Member | None:
        """Record the poll's outcome in memory (written behind)."""
        return await self._members.update(self.group, self.member_id, change)
