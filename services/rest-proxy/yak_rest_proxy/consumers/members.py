"""``Members``: drives the member protocol (``member_protocol``) against etcd.

Every operation reads the instance (its record, its group's state and its positions, in one
etcd read), reconciles it with its grant, decides, and applies the decision's write as a
compare-and-swap; a lost race re-reads and decides again. Positions are written at the end of
every poll. Every request for an instance refreshes its lease (at most once a second per
proxy), so an idle instance disappears by itself and the coordinator gives its partitions to
the others. Time comes from the injected ``Clock``. Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from yak.clock import Clock
from yak.errors import MetadataStoreError, UnknownMemberIdError, YakError
from yak.metadata.keyspace import Keyspace, validate_member_id
from yak.metadata.models import GroupMember
from yak.metadata.store import MetadataStore
from yak.names import validate_group_id
from yak_rest_proxy.consumers import member_protocol as protocol
from yak_rest_proxy.consumers.member_protocol import Member, MemberRead, Step
from yak_rest_proxy.consumers.member_store import MemberStore

__all__ = ["Members"]

_ATTEMPTS = 20
_KEEPALIVE_EVERY_S = 1.0
#: No proxy holds an instance: each request reads it from etcd.
_NO_HOLDER = ""


class Members:
    """The consumer instances, read from etcd at every request; see the module docstring."""

    def __init__(
        self, store: MemberStore, metadata: MetadataStore, keyspace: Keyspace, *, clock: Clock
    ) -> None:
        self._store = store
        self._metadata = metadata
        self._keyspace = keyspace
        self._clock = clock
        self._touched: dict[int, float] = {}

    async def create(self, group: str, record: GroupMember, timeout_ms: int) -> Member:
        validate_group_id(group)
        read = await self._store.create(group, record, timeout_ms, _NO_HOLDER)
        return protocol.adopt(read, _NO_HOLDER)

    async def current(self, group: str, member_id: str) -> Member:
        """The member with its assignment brought up to date (``reconcile``)."""
        return await self.run(group, member_id, Step)

    async def run(self, group: str, member_id: str, decide: Callable[[Member], Step]) -> Member:
        """Reconcile, then apply ``decide``'s step; retried on fresh reads after a lost race."""
        for _ in range(_ATTEMPTS):
            read = await self._load(group, member_id)
            adopted = protocol.adopt(read, _NO_HOLDER)
            now_ms = self._clock.time_ms()
            member = await self._apply(protocol.reconcile(adopted, read.grant, now_ms))
            if member is not None:
                member = await self._apply(decide(member))
            if member is not None:
                return member
        raise MetadataStoreError(f"instance {member_id!r}: too many concurrent updates")

    async def update(
        self, group: str, member_id: str, change: Callable[[Member], Member]
    ) -> Member | None:
        """Apply ``change`` (a poll's outcome) and write the positions it leaves."""
        return await self.run(
            group, member_id, lambda m: protocol.flush(change(m), self._clock.time_ms())
        )

    async def leave(self, group: str, member_id: str) -> None:
        """Delete the member, auto-committing its positions first (as a closing consumer)."""
        member = await self.current(group, member_id)
        if member.auto_commit:
            with contextlib.suppress(YakError):
                now_ms = self._clock.time_ms()
                member = await self.run(
                    group, member_id, lambda m: protocol.commit(m, None, now_ms)
                )
        await self._store.apply(protocol.leave(member))
        self._touched.pop(member.base.lease_id, None)
        await self._store.revoke(member.base.lease_id)

    async def wait_for_state(self, group: str, member_id: str, timeout_s: float) -> None:
        """Until the group's state changes (an etcd watch) or the timeout."""
        if timeout_s <= 0:
            return
        watch = self._metadata.watch_prefix(self._keyspace.group_state(group))
        with contextlib.suppress(TimeoutError, YakError):
            async with asyncio.timeout(timeout_s), watch:
                async for _event in watch:
                    return

    @asynccontextmanager
    async def using(self, group: str, member_id: str) -> AsyncIterator[None]:
        """A request for the member is under way (nothing to do: each operation reads it)."""
        yield

    async def _apply(self, step: Step) -> Member | None:
        if step.write is None:
            return step.member
        revision = await self._store.apply(step.write)
        return None if revision is None else protocol.settle(step, revision)

    async def _load(self, group: str, member_id: str) -> MemberRead:
        validate_group_id(group)
        try:
            validate_member_id(member_id)
        except ValueError:
            raise missing(group, member_id) from None
        read = await self._store.read(group, member_id)
        if read is None:
            raise missing(group, member_id)
        lease = read.record.lease_id
        now = self._clock.monotonic()
        if now - self._touched.get(lease, -_KEEPALIVE_EVERY_S) >= _KEEPALIVE_EVERY_S:
            if not await self._store.keep_alive(lease):
                raise missing(group, member_id)
            self._touched[lease] = now
            if len(self._touched) > 10_000:
                self._touched.clear()
        return read


def missing(group: str, member_id: str) -> UnknownMemberIdError:
    return UnknownMemberIdError(
        f"consumer instance {member_id!r} not found in group {group!r} "
        "(it was deleted or expired after its instance timeout)",
        group=group,
        instance=member_id,
    )
