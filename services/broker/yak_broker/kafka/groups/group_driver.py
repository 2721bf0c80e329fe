"""``GroupDriver``: the asyncio driver of one classic group led by this broker — the pure
``ClassicGroup`` machine fed requests and timer ticks, its parked answers resolved, its marker
written and removed (docs/decisions.md, "Kafka classic groups").

- **Parked requests.** A JoinGroup or SyncGroup gets a request id (a counter) and a future;
  after every input the driver drains the machine's outbox and resolves the futures by id. A
  caller that goes away (its connection closed: the listener cancels the handler) just drops
  its future; the machine's later answer finds no one and is discarded.
- **Timer.** One task per group sleeps until the machine's ``next_deadline()`` and ticks it.
  Renewed sessions move deadlines later: the timer then wakes early, ticks (nothing due) and
  sleeps again, so a heartbeat never re-arms it; an earlier deadline replaces it.
- **Marker.** Before the first JoinGroup that can add a member to an Empty group, the driver
  claims ``groups/<g>/classic`` (``MarkerOps.claim``: refused while REST members exist →
  INCONSISTENT_GROUP_PROTOCOL; held by another broker, which is still handing the group over →
  COORDINATOR_LOAD_IN_PROGRESS, retriable); when the group is Empty again it releases it. Both
  run under the group's lock, so a release and the next claim never cross. The marker's
  ``mod_revision`` guards the group's commits (``commit``). No etcd write per heartbeat, join
  or sync: two per group life.
- **Unload** (the hash moved the group, or the broker stops): parked requests are answered
  NOT_COORDINATOR by the machine, the timer stops, the marker is released.

Single event loop; every method is called from it. The machine is only touched between awaits.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Protocol

from yak.clock import Clock
from yak.errors import YakError
from yak.metadata.classic_groups import MarkerClaim
from yak.protocol.kafka_errors import GroupErrorCode
from yak_broker.kafka.groups.state.classic_group import ClassicGroup
from yak_broker.kafka.groups.state.records import (
    GroupSettings,
    GroupStateName,
    Heartbeat,
    JoinGroup,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMember,
    SyncGroup,
    SyncGroupResult,
)

__all__ = ["GroupDriver", "MarkerOps"]

_log = logging.getLogger(__name__)
_E = GroupErrorCode
_Result = JoinGroupResult | SyncGroupResult


class MarkerOps(Protocol):
    """The marker's etcd writes, on this broker's lease (the coordinator's)."""

    async def claim(self, group: str, protocol_type: str, generation: int) -> MarkerClaim: ...

    async def release(self, group: str, revision: int) -> bool: ...


class GroupDriver:
    """See the module doc. ``on_due`` is asked before each tick whether the group is still
    led here (False: the coordinator unloaded it); ``on_dead`` is told when it went Dead."""

    def __init__(
        self,
        group_id: str,
        settings: GroupSettings,
        clock: Clock,
        markers: MarkerOps,
        on_due: Callable[[GroupDriver], bool],
        on_dead: Callable[[GroupDriver], None],
    ) -> None:
        self.group_id = group_id
        self.machine = ClassicGroup(group_id, settings)
        #: The marker's mod_revision while this broker holds it (0: not held).
        self.marker_revision = 0
        self._clock = clock
        self._markers = markers
        self._on_due = on_due
        self._on_dead = on_dead
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._waiters: dict[int, asyncio.Future[_Result]] = {}
        self._timer: asyncio.Task[None] | None = None
        self._timer_at: int | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        #: A release of the marker is scheduled (one at a time).
        self._releasing = False

    def now_ms(self) -> int:
        return int(self._clock.monotonic() * 1000)

    # --- requests --------------------------------------------------------------------------

    async def join(self, request: JoinGroup) -> JoinGroupResult:
        if _may_add_member(request) and not self.marker_revision:
            error = await self._claim(request.protocol_type)
            if error is not None:
                return JoinGroupResult(error, request.member_id)
        request = replace(request, request_id=next(self._ids), fresh_id=uuid.uuid4().hex)
        result = await self._park(request.request_id, lambda now: self.machine.join(request, now))
        assert isinstance(result, JoinGroupResult)
        return result

    async def sync(self, request: SyncGroup) -> SyncGroupResult:
        request = replace(request, request_id=next(self._ids))
        result = await self._park(request.request_id, lambda now: self.machine.sync(request, now))
        assert isinstance(result, SyncGroupResult)
        return result

    def heartbeat(self, request: Heartbeat) -> GroupErrorCode:
        error = self.machine.heartbeat(request, self.now_ms())
        self._after()
        return error

    def leave(self, members: Iterable[LeaveMember]) -> LeaveGroupResult:
        result = self.machine.leave(members, self.now_ms())
        self._after()
        return result

    async def commit(
        self, identity: Heartbeat, write: Callable[[int], Awaitable[bool]]
    ) -> GroupErrorCode:
        """Check an OffsetCommit with the machine, then ``write(marker revision)`` (0: a simple
        commit on an Empty group, which needs no marker and no REST member)."""
        error = self.machine.check_commit(identity, self.now_ms())
        self._after()
        if error is not _E.NONE:
            return error
        if identity.generation_id < 0 and self.machine.state is GroupStateName.EMPTY:
            async with self._lock:
                if self.marker_revision:  # a release still on its way: do it first
                    await self._release_locked()
                return _E.NONE if await write(0) else _E.UNKNOWN_MEMBER_ID
        revision = self.marker_revision
        if not revision or not await write(revision):
            return _E.NOT_COORDINATOR  # the marker is not ours (any more): we were deposed
        return _E.NONE

    def delete(self) -> GroupErrorCode:
        error = self.machine.delete()
        self._after()
        return error

    def unload(self) -> None:
        """No longer led here: answer what is parked NOT_COORDINATOR, stop, release."""
        if self.machine.state is not GroupStateName.DEAD:
            self.machine.unload()
        self._after()

    async def settle(self) -> None:
        """Wait for the marker writes under way."""
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        """Stop the timer and wait for marker writes under way (the broker stops)."""
        self._stop_timer()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- plumbing --------------------------------------------------------------------------

    async def _park(self, request_id: int, apply: Callable[[int], None]) -> _Result:
        future: asyncio.Future[_Result] = asyncio.get_running_loop().create_future()
        self._waiters[request_id] = future
        try:
            apply(self.now_ms())
            self._after()
            return await future
        finally:
            self._waiters.pop(request_id, None)

    def _after(self, *, rearm: bool = True) -> None:
        """After every input: answer what the machine answered, then timer and marker."""
        for reply in self.machine.take_replies():
            future = self._waiters.pop(reply.request_id, None)
            if future is not None and not future.done():
                future.set_result(reply.result)
        state = self.machine.state
        empty = state in (GroupStateName.EMPTY, GroupStateName.DEAD)
        if empty and self.marker_revision and not self._releasing:
            self._releasing = True
            self._spawn(self._release_if_empty)
        if state is GroupStateName.DEAD:
            self._stop_timer()
            self._on_dead(self)
        elif rearm:
            self._rearm()

    def _rearm(self) -> None:
        deadline = self.machine.next_deadline()
        if deadline is None:
            return  # a running timer finds nothing due and ends
        running = self._timer is not None and not self._timer.done()
        if running and self._timer_at is not None and self._timer_at <= deadline:
            return
        self._stop_timer()
        self._timer_at = deadline
        self._timer = asyncio.create_task(self._run_timer(deadline), name=f"group-{self.group_id}")

    def _stop_timer(self) -> None:
        timer, self._timer, self._timer_at = self._timer, None, None
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()

    async def _run_timer(self, deadline: int) -> None:
        while True:
            delay = deadline - self.now_ms()
            if delay > 0:
                await self._clock.sleep(delay / 1000)
            if not self._on_due(self):
                return
            self.machine.tick(self.now_ms())
            self._after(rearm=False)
            following = self.machine.next_deadline()
            if following is None or self.machine.state is GroupStateName.DEAD:
                if self._timer is asyncio.current_task():
                    self._timer = self._timer_at = None
                return
            deadline = self._timer_at = following

    async def _claim(self, protocol_type: str) -> GroupErrorCode | None:
        async with self._lock:
            if self.marker_revision:
                return None
            try:
                claim = await self._markers.claim(
                    self.group_id, protocol_type, self.machine.generation_id
                )
            except YakError as exc:  # the store unreachable, or the broker stopped
                _log.warning("group %s: could not write its marker: %s", self.group_id, exc)
                return _E.COORDINATOR_NOT_AVAILABLE
        if claim.revision:
            self.marker_revision = claim.revision
            return None
        if claim.rest_members:
            # JoinGroup has no error message: say why here.
            _log.info(
                "group %s: refusing a Kafka member, the group has %d REST member(s)",
                self.group_id,
                claim.rest_members,
            )
            return _E.INCONSISTENT_GROUP_PROTOCOL
        return _E.COORDINATOR_LOAD_IN_PROGRESS  # another broker is still handing it over

    async def _release_if_empty(self) -> None:
        try:
            async with self._lock:
                state = self.machine.state
                if self.marker_revision and state in (GroupStateName.EMPTY, GroupStateName.DEAD):
                    await self._release_locked()
        finally:
            self._releasing = False

    async def _release_locked(self) -> None:
        revision, self.marker_revision = self.marker_revision, 0
        try:
            await self._markers.release(self.group_id, revision)
        except YakError as exc:  # the store unreachable, or the broker stopped
            # It stays on this broker's lease: a later claim here adopts it.
            _log.warning("group %s: could not remove its marker: %s", self.group_id, exc)

    def _spawn(self, work: Callable[[], Awaitable[None]]) -> None:
        async def run() -> None:
            try:
                await work()
            except asyncio.CancelledError:
                pass
            except Exception:  # a background write: nobody else would hear of it
                _log.exception("group %s: a marker write failed", self.group_id)

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _may_add_member(request: JoinGroup) -> bool:
    """Whether the machine may add a member for this join (a v4+ newcomer without an id only
    gets one reserved, with MEMBER_ID_REQUIRED: no marker for that)."""
    return bool(
        request.member_id or not request.require_known_member_id or request.group_instance_id
    )
