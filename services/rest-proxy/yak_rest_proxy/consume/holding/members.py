"""``Members``: the consumer instances this proxy holds, in memory, kept in step with etcd.

The first request for an instance makes this proxy its *holder* (``member_protocol``,
"Holding"): it claims the instance in etcd, asking the proxy that holds it to hand it over,
and taking it over after ``handoff_timeout_s`` if that one does not answer (it died: the next
holder starts from what etcd holds). From then on:

- **no etcd on the poll path**: the member, its positions and its group's state (one
  ``GroupWatch`` per group with held members) are in memory; a poll reads them, fetches and
  moves the positions in memory;
- **written behind**: positions and due auto-commits every ``flush_interval_s`` (0: at every
  poll) — a member whose positions a commit or a seek stored within the last interval waits
  for the next round, so a consumer committing every second costs one etcd write a second,
  not two; a position is at most two intervals old in etcd — and whenever the holder lets the
  instance go; a commit is written through (answered
  once stored, positions with it), so is a seek, a subscription change or a rebalance (the
  release of a partition, its position auto-committed). Every write is guarded by the member
  record's and the positions' mod_revisions (and the state's where ownership matters): one
  that finds a guard changed re-reads etcd and decides again;
- **kept in step by the watch**: a new group state is applied at the member's next request; a
  deleted member (lease expired, fenced by the coordinator, deleted through another proxy) is
  dropped, and the next request answers ``UNKNOWN_MEMBER_ID``; a request from another proxy
  to hand the member over is answered at once (positions and due auto-commits written,
  ``holder :=`` the asker) and a takeover drops it without a write. While the watch is down,
  every request re-reads etcd first;
- **leases** are refreshed off the request path: a request has its member's lease refreshed in
  the background (at most once per ``keepalive_s``), and so does a request still under way
  every ``keepalive_s`` (a long poll): an idle instance still expires after its timeout;
- members without a request for ``idle_s`` are let go (written, holder cleared); so is every
  member on ``stop()``.

A crash loses what was not yet written behind: the records polled since the last write are
delivered again by the next holder (at-least-once); a commit, once answered, is in etcd. A
client sending requests for one instance to several proxies at once gets them served in turn,
each switch a handoff (a few etcd round trips). Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from yak.clock import Clock
from yak.errors import MetadataStoreError, UnknownMemberIdError, YakError
from yak.metadata.keyspace import Keyspace, validate_member_id
from yak.metadata.models import GroupMember
from yak.metadata.store import MetadataStore
from yak.names import validate_group_id
from yak_rest_proxy.consume.holding.group_watch import GroupWatch
from yak_rest_proxy.consume.holding.member_store import MemberStore
from yak_rest_proxy.consume.membership import member_protocol as protocol
from yak_rest_proxy.consume.membership.member_state import Grant, Member, Step

__all__ = ["Members", "missing"]

log = logging.getLogger(__name__)

_ATTEMPTS = 20
_STOP_TIMEOUT_S = 5.0
MemberKey = tuple[str, str]


class _LostError(Exception):
    """The member went to another holder while a request was using it."""


@dataclass(eq=False)
class _Held:
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
        self._metadata = metadata
        self._keyspace = keyspace
        self._clock = clock
        self.holder = holder
        self._flush_interval_s = flush_interval_s
        self._handoff_timeout_s = handoff_timeout_s
        self._keepalive_s = keepalive_s
        self._idle_s = idle_s
        self._held: dict[MemberKey, _Held] = {}
        self._acquiring: dict[MemberKey, _Turn] = {}
        self._watches: dict[str, GroupWatch] = {}
        self._refs: Counter[str] = Counter()
        self._tasks: set[asyncio.Task[Any]] = set()
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
        for held in list(self._held.values()):
            if not held.releasing:
                self._spawn(self._release(held))
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=_STOP_TIMEOUT_S)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for watch in list(self._watches.values()):
            await watch.stop()
        self._watches.clear()
        self._refs.clear()

    # -- what requests do ---------------------------------------------------------------------

    async def create(self, group: str, record: GroupMember, timeout_ms: int) -> Member:
        """Create the member, held here from the start."""
        validate_group_id(group)
        watch = self._open(group)
        try:
            read = await self._store.create(group, record, timeout_ms, self.holder)
        except BaseException:
            self._close(group)
            raise
        now = self._clock.monotonic()
        return self._install(protocol.adopt(read, self.holder), watch, alive_at=now).member

    async def current(self, group: str, member_id: str) -> Member:
        """The member with its assignment brought up to date (``reconcile``)."""
        return await self.run(group, member_id, Step)

    async def run(self, group: str, member_id: str, decide: Callable[[Member], Step]) -> Member:
        """Reconcile, then apply ``decide``'s step (written through if it writes)."""
        for _ in range(_ATTEMPTS):
            held = await self._get(group, member_id)
            async with held.lock:
                if held.lost:
                    continue
                try:
                    return await self._converge(held, decide)
                except _LostError:
                    continue
        raise MetadataStoreError(f"instance {member_id!r}: held elsewhere again and again")

    async def update(
        self, group: str, member_id: str, change: Callable[[Member], Member]
    ) -> Member | None:
        """Apply ``change`` (a poll's outcome) in memory; None if the member left meanwhile
        (another holder delivers those records again)."""
        held = self._held.get((group, member_id))
        if held is None:
            return None
        async with held.lock:
            if held.lost:
                return None
            held.member = change(held.member)
            if self._flush_interval_s <= 0:  # written through: before the poll answers
                with contextlib.suppress(_LostError):
                    await self._converge(held, self._flush_step)
            return held.member

    async def leave(self, group: str, member_id: str) -> None:
        """Delete the member, auto-committing its positions first (as a closing consumer)."""
        member = await self.current(group, member_id)
        if member.auto_commit:
            with contextlib.suppress(YakError):
                now_ms = self._clock.time_ms()
                member = await self.run(
                    group, member_id, lambda m: protocol.commit(m, None, now_ms)
                )
        held = self._held.get((group, member_id))
        if held is not None:
            async with held.lock:
                await self._store.apply(protocol.leave(held.member))
                self._lose(held)
        else:
            await self._store.apply(protocol.leave(member))
        await self._store.revoke(member.base.lease_id)

    async def wait_for_state(self, member: Member, timeout_s: float) -> None:
        """Until the group's state differs from the one ``member`` was reconciled with (its
        watch), or the timeout."""
        held = self._held.get((member.group, member.member_id))
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
    async def using(self, group: str, member_id: str) -> AsyncIterator[None]:
        """A request for the member is under way: its lease is kept alive until it ends."""
        held = await self._get(group, member_id)
        held.in_flight += 1
        try:
            yield
        finally:
            held.in_flight -= 1
            self._touch(held)

    # -- holding ------------------------------------------------------------------------------

    async def _get(self, group: str, member_id: str) -> _Held:
        key = (group, member_id)
        held = self._held.get(key)
        if held is None or held.lost:
            # One acquisition per member at a time: concurrent requests wait for it.
            turn = self._acquiring.setdefault(key, _Turn())
            turn.waiting += 1
            try:
                async with turn.lock:
                    held = self._held.get(key)
                    if held is None or held.lost:
                        held = await self._acquire(group, member_id)
            finally:
                turn.waiting -= 1
                if not turn.waiting:
                    del self._acquiring[key]
        self._touch(held)
        return held

    async def _acquire(self, group: str, member_id: str) -> _Held:
        """Claim the member: at once if nobody holds it, else ask its holder and wait for the
        handoff, taking it over once the holder left the request unanswered too long."""
        validate_group_id(group)
        try:
            validate_member_id(member_id)
        except ValueError:
            raise missing(group, member_id) from None
        watch = self._open(group)
        try:
            asked, asked_of, deadline = 0, "", 0.0
            for _ in range(_ATTEMPTS):
                read = await self._store.read(group, member_id)
                if read is None:
                    raise missing(group, member_id)
                if read.stored.holder != asked_of:  # each holder gets its time to answer
                    asked_of = read.stored.holder
                    deadline = self._clock.monotonic() + self._handoff_timeout_s
                late = self._clock.monotonic() >= deadline
                if protocol.may_claim(read, self.holder, asked if late else 0):
                    step = protocol.claim(read, self.holder)
                    member = await self._write(step)
                    if member is not None:  # its lease is refreshed at the first use
                        return self._install(member, watch, alive_at=-math.inf)
                    asked = 0
                    continue
                if read.stored.revision != asked:
                    revision = await self._store.apply(protocol.ask(read, self.holder))
                    if revision is None:
                        continue
                    asked = revision
                left = max(0.0, deadline - self._clock.monotonic())
                await watch.wait(functools.partial(_changed_since, watch, member_id, asked), left)
            raise MetadataStoreError(f"instance {member_id!r}: could not take it over")
        except BaseException:
            self._close(group)
            raise

    def _install(self, member: Member, watch: GroupWatch, *, alive_at: float) -> _Held:
        held = _Held(member, watch, used_at=self._clock.monotonic(), alive_at=alive_at)
        former = self._held.get(held.key)
        if former is not None:  # a member of the same id, deleted: its watch has not said so yet
            self._lose(former)
        self._held[held.key] = held
        self._check(held)
        return held

    async def _write(self, step: Step) -> Member | None:
        if step.write is None:
            return step.member
        revision = await self._store.apply(step.write)
        return None if revision is None else protocol.settle(step, revision)

    async def _converge(
        self, held: _Held, decide: Callable[[Member], Step], *, behind: bool = False
    ) -> Member:
        """Under ``held.lock``: reconcile with the newest grant, then ``decide``; a write that
        lost a race re-reads etcd and both are decided again."""
        if not held.watch.live:
            await self._refresh(held)
        for attempt in range(_ATTEMPTS):
            if attempt:
                await self._refresh(held)
            now_ms = self._clock.time_ms()
            member = await self._write(protocol.reconcile(held.member, self._grant(held), now_ms))
            if member is None:
                continue
            held.member = member
            stored_at = member.positions_revision
            member = await self._write(decide(member))
            if member is None:
                continue
            held.member = member
            if member.positions_revision != stored_at and not behind:
                held.positions_written_at = self._clock.monotonic()
            return member
        raise MetadataStoreError(f"instance {held.member.member_id!r}: too many concurrent updates")

    async def _refresh(self, held: _Held) -> None:
        group, member_id = held.key
        read = await self._store.read(group, member_id)
        if read is None:
            self._lose(held)
            raise missing(group, member_id)
        fresh = protocol.refresh(held.member, read)
        if fresh is None:
            self._lose(held)
            raise _LostError
        held.member = fresh
        if read.stored.wanted_by not in ("", self.holder):
            self._hand_off(held, read.stored.wanted_by)

    def _grant(self, held: _Held) -> Grant:
        """The watch's grant when it is at least as new as the member's."""
        watch, member = held.watch, held.member
        if watch.live and watch.revision >= member.grant.as_of:
            return watch.grant(member.member_id)
        return member.grant

    def _flush_step(self, member: Member) -> Step:
        return protocol.flush(member, self._clock.time_ms())

    # -- letting go ---------------------------------------------------------------------------

    def _on_change(self, group: str, member_id: str | None) -> None:
        """The group watch saw a change (of ``member_id``'s keys; None: any)."""
        if member_id is not None:
            held = self._held.get((group, member_id))
            if held is not None:
                self._check(held)
            return
        for (held_group, _), held in list(self._held.items()):
            if held_group == group:
                self._check(held)

    def _check(self, held: _Held) -> None:
        """Drop a member deleted or taken over; hand it over when another proxy asked."""
        seen, member = held.watch.seen(held.member.member_id), held.member
        if seen.member_revision == 0 and seen.member_changed > member.revision:
            self._lose(held)
        elif seen.positions_changed > member.positions_revision:
            stored = seen.positions
            if stored.revision == 0 or stored.holder != self.holder:
                self._lose(held)
            elif stored.wanted_by not in ("", self.holder):
                self._hand_off(held, stored.wanted_by)

    def _hand_off(self, held: _Held, to: str) -> None:
        held.handing_to = to
        if not held.releasing:
            self._spawn(self._release(held))

    async def _release(self, held: _Held) -> None:
        """Write the member behind and name its next holder (``handing_to``, else none)."""
        if held.releasing and held.handing_to is None:
            return
        held.releasing = True
        async with held.lock:
            seen = held.watch.seen(held.member.member_id)
            held.member = protocol.asked(held.member, seen.positions)  # no read to learn it
            for _ in range(_ATTEMPTS):
                if held.lost:
                    return
                now_ms = self._clock.time_ms()
                write = protocol.release(held.member, now_ms, held.handing_to or "")
                try:
                    if await self._store.apply(write) is not None:
                        self._lose(held)
                        return
                    await self._refresh(held)
                    member = await self._write(
                        protocol.reconcile(held.member, self._grant(held), now_ms)
                    )
                    held.member = member or held.member
                except (_LostError, YakError) as exc:
                    log.info("consumer %s/%s not handed over: %s", *held.key, exc)
                    break
            self._lose(held)

    def _lose(self, held: _Held) -> None:
        if held.lost:
            return
        held.lost = True
        if self._held.get(held.key) is held:
            del self._held[held.key]
        self._close(held.key[0])

    # -- background ---------------------------------------------------------------------------

    async def _background(self, started: float) -> None:
        tick = self._keepalive_s
        if self._flush_interval_s > 0:
            tick = min(tick, self._flush_interval_s)
        next_tick, next_flush = started, started + self._flush_interval_s
        while True:
            next_tick = max(next_tick + tick, self._clock.monotonic())
            await self._clock.sleep(next_tick - self._clock.monotonic())
            now = self._clock.monotonic()
            for held in list(self._held.values()):
                if held.in_flight:
                    self._touch(held)
                elif now - held.used_at >= self._idle_s and not held.releasing:
                    self._spawn(self._release(held))
            if self._flush_interval_s > 0 and now >= next_flush:
                next_flush = now + self._flush_interval_s
                written = now - self._flush_interval_s
                dirty = [
                    h
                    for h in self._held.values()
                    if h.member.dirty and not h.releasing and h.positions_written_at <= written
                ]
                results = await asyncio.gather(
                    *(self._flush(h) for h in dirty), return_exceptions=True
                )
                for result in results:
                    if isinstance(result, Exception):
                        log.error("consumer positions not written", exc_info=result)

    async def _flush(self, held: _Held) -> None:
        async with held.lock:
            if held.lost or not held.member.dirty:
                return
            try:
                await self._converge(held, self._flush_step, behind=True)
            except (_LostError, YakError) as exc:
                log.info("consumer %s/%s: positions not written: %s", *held.key, exc)

    def _touch(self, held: _Held) -> None:
        """A request used the member: refresh its lease in the background if it is due."""
        now = self._clock.monotonic()
        held.used_at = now
        if now - held.alive_at >= self._keepalive_s:
            held.alive_at = now
            self._spawn(self._keep_alive(held))

    async def _keep_alive(self, held: _Held) -> None:
        try:
            alive = await self._store.keep_alive(held.member.base.lease_id)
        except MetadataStoreError as exc:
            log.warning("consumer %s/%s: lease not refreshed: %s", *held.key, exc)
            held.alive_at = 0.0
            return
        if not alive:
            self._lose(held)  # expired: its keys are gone

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _open(self, group: str) -> GroupWatch:
        watch = self._watches.get(group)
        if watch is None:
            watch = GroupWatch(
                self._metadata,
                self._keyspace,
                group,
                clock=self._clock,
                listener=lambda member_id: self._on_change(group, member_id),
            )
            self._watches[group] = watch
            watch.start()
        self._refs[group] += 1
        return watch

    def _close(self, group: str) -> None:
        self._refs[group] -= 1
        if self._refs[group] <= 0:
            del self._refs[group]
            watch = self._watches.pop(group, None)
            if watch is not None:
                self._spawn(watch.stop())


def _changed_since(watch: GroupWatch, member_id: str, revision: int) -> bool:
    return watch.seen(member_id).changed > revision


def missing(group: str, member_id: str) -> UnknownMemberIdError:
    return UnknownMemberIdError(
        f"consumer instance {member_id!r} not found in group {group!r} "
        "(it was deleted or expired after its instance timeout)",
        group=group,
        instance=member_id,
    )
