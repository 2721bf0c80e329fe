"""The group coordinator: keeps every consumer group's ``GroupState`` current while this
coordinator is the active controller (one ``run`` per term; the caller cancels it).

Three tasks share one ``GroupsView``:

- the **groups follower** range-reads ``groups/`` and watches it from the read's revision + 1
  (a compacted watch reloads), marking each group whose member records or state changed;
- the **topics follower** is told by the ``MetadataCache`` when a topic record changes (or the
  cache reloads) and, when the partition counts changed, marks every group (pattern
  subscriptions may match a new topic); partition state changes cost it nothing;
- the **coordinator loop** sleeps until a group is marked, the earliest rebalance deadline
  falls due, or the term ends; then it runs ``reconcile_group`` for each marked group.

A decision is written in one transaction: the term's fence, the state key's ``mod_revision``
(0: absent), the ``mod_revision`` of every member record in the view and the absence of every
member the stored state names that the view does not have; then the new state, the deletion of
fenced members (record and positions) and a read of the group's prefix. The read, made in the
same transaction on either branch, refreshes the group in the view and the group is decided
again: a failed compare thus means "re-read and recompute", and after a success the recompute
finds nothing to do. A failed fence ends the term. etcd allows 128 compares per transaction,
so a group is limited to about 125 members.

Nothing polls: every wake-up has a cause. Store errors are retried with backoff.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from yak.clock import Clock, SystemClock
from yak.errors import MetadataStoreError, RevisionCompactedError
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import KeyKind, Keyspace, ParsedKey
from yak.metadata.store import Compare, DeleteOp, GetOp, GetResponse, MetadataStore, Op, PutOp
from yak_coordinator.decisions.group_reconcile import (
    GroupDecision,
    partition_counts,
    reconcile_group,
)
from yak_coordinator.election import Term
from yak_coordinator.groups.groups_view import GroupRecords, GroupsView

__all__ = ["GroupCoordinator"]

log = logging.getLogger(__name__)

_RETRY_MIN_S = 0.1
_RETRY_MAX_S = 5.0
#: Failed compares in a row after which a group waits for its next change (a safety net:
#: each failure re-reads the group, so a second one needs a concurrent writer).
_MAX_CONFLICTS = 5


class GroupCoordinator:
    """Drives every group's state during one term at a time (see the module docstring)."""

    def __init__(
        self,
        store: MetadataStore,
        keyspace: Keyspace,
        cache: MetadataCache,
        *,
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self._keyspace = keyspace
        self._cache = cache
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._reset()

    def _reset(self) -> None:
        self._view = GroupsView(self._keyspace)
        self._counts: dict[str, int] = {}
        self._dirty: set[str] = set()
        self._deadlines: dict[str, int] = {}
        self._conflicts: dict[str, int] = {}
        self._retry_s = _RETRY_MIN_S
        self._wake = asyncio.Event()
        self._loaded = asyncio.Event()

    async def run(self, term: Term) -> None:
        """Coordinate groups until the term ends (or the caller cancels)."""
        self._reset()
        self._counts = partition_counts(self._cache.snapshot)
        tasks = [
            _task(self._follow_groups()),
            _task(self._follow_topics()),
            _task(self._coordinate(term)),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # a follower's failure is the caller's to see
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _mark(self, groups: set[str] | str) -> None:
        self._dirty.update({groups} if isinstance(groups, str) else groups)
        self._wake.set()

    # -- followers ------------------------------------------------------------------------------

    async def _follow_groups(self) -> None:
        prefix = self._keyspace.groups_prefix
        delay, reload = _RETRY_MIN_S, True
        while True:
            try:
                if reload:
                    self._mark(self._view.load(await self._store.range_prefix(prefix)))
                    reload = False
                    self._loaded.set()
                async with self._store.watch_prefix(prefix, self._view.revision + 1) as watch:
                    _raise_if_cancelling(None)
                    delay = _RETRY_MIN_S
                    async for event in watch:
                        group = self._view.apply(event)
                        if group is not None:
                            self._mark(group)
                raise MetadataStoreError("the groups watch ended")
            except RevisionCompactedError:
                log.warning("groups watch fell behind compaction; reloading")
                reload = True
            except MetadataStoreError as exc:
                _raise_if_cancelling(exc)
                log.warning("groups watch failed (%s); retrying in %.1f s", exc, delay)
                await self._clock.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX_S)

    async def _follow_topics(self) -> None:
        changed = asyncio.Event()

        def on_change(key: ParsedKey | None) -> None:
            if key is None or key.kind is KeyKind.TOPIC:
                changed.set()

        unsubscribe = self._cache.subscribe(on_change)
        changed.set()  # a topic may have changed since ``run`` counted
        try:
            while True:
                await changed.wait()
                changed.clear()
                counts = partition_counts(self._cache.snapshot)
                if counts != self._counts:
                    self._counts = counts
                    self._mark(set(self._view.groups))
        finally:
            unsubscribe()

    # -- the coordinator loop -------------------------------------------------------------------

    async def _coordinate(self, term: Term) -> None:
        await self._loaded.wait()
        while not term.ended:
            await self._wait(term)
            now = self._clock.time_ms()
            due = {group for group, at in self._deadlines.items() if at <= now}
            groups, self._dirty = sorted(self._dirty | due), set()
            await self._reconcile_all(groups, term)

    async def _reconcile_all(self, groups: list[str], term: Term) -> None:
        for group in groups:
            if term.ended:
                return
            try:
                await self._reconcile(group, term)
                self._retry_s = _RETRY_MIN_S
            except MetadataStoreError as exc:
                log.warning(
                    "group %s: state write failed (%s); retrying in %.1f s",
                    group,
                    exc,
                    self._retry_s,
                )
                self._mark(group)
                await self._clock.sleep(self._retry_s)
                self._retry_s = min(self._retry_s * 2, _RETRY_MAX_S)

    async def _wait(self, term: Term) -> None:
        """Until a group is marked, the earliest deadline falls due or the term ends."""
        if self._dirty:
            return
        self._wake.clear()
        waiters = [_task(self._wake.wait()), _task(term.wait_ended())]
        deadline = min(self._deadlines.values(), default=None)
        if deadline is not None:
            waiters.append(_task(self._sleep_until(deadline)))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)

    async def _sleep_until(self, deadline_ms: int) -> None:
        # The delay is taken when the sleep starts, not when the task was created.
        await self._clock.sleep(max(0, deadline_ms - self._clock.time_ms()) / 1000)

    async def _reconcile(self, group: str, term: Term) -> None:
        records = self._view.groups.get(group)
        if records is None:
            self._deadlines.pop(group, None)
            return
        now = self._clock.time_ms()
        decision = reconcile_group(group, records.live_members(), records.state, self._counts, now)
        if decision.next_deadline_ms is None:
            self._deadlines.pop(group, None)
        else:
            self._deadlines[group] = decision.next_deadline_ms
        if decision.state is not None or decision.fenced:
            await self._write(group, records, decision, term)

    async def _write(
        self, group: str, records: GroupRecords, decision: GroupDecision, term: Term
    ) -> None:
        ks = self._keyspace
        state_key = ks.group_state(group)
        compares = [term.fence, Compare.mod_revision(state_key, records.state_revision)]
        present = self._view.member_revisions(group)
        for member, revision in sorted(present.items()):
            compares.append(Compare.mod_revision(ks.group_member(group, member), revision))
        for member in sorted(_named_members(records) - set(present)):
            compares.append(Compare.absent(ks.group_member(group, member)))
        ops: list[Op] = []
        if decision.state is not None:
            ops.append(PutOp(state_key, decision.state.encode()))
        for member in decision.fenced:
            ops += [
                DeleteOp(ks.group_member(group, member)),
                DeleteOp(ks.group_positions(group, member)),
            ]
        read = GetOp(ks.group_prefix(group), prefix=True)
        result = await self._store.txn(compares, [*ops, read], [GetOp(ks.controller), read])
        reread = result.responses[-1]
        assert isinstance(reread, GetResponse)
        if not result.succeeded:
            controller = result.responses[0]
            assert isinstance(controller, GetResponse)
            if not controller.kvs or not term.fence.holds(controller.kvs[0]):
                term.end("another coordinator holds the controller key")
                return
        self._view.replace(group, reread.kvs, result.revision)
        if result.succeeded:
            self._conflicts.pop(group, None)
            self._log(group, decision)
            self._mark(group)  # the read may hold changes the watch has not delivered yet
            return
        conflicts = self._conflicts[group] = self._conflicts.get(group, 0) + 1
        if conflicts < _MAX_CONFLICTS:
            self._mark(group)
        else:
            log.error(
                "group %s: %d conflicting writes in a row; waiting for a change", group, conflicts
            )
            self._conflicts.pop(group)

    @staticmethod
    def _log(group: str, decision: GroupDecision) -> None:
        for member in decision.fenced:
            log.warning("group %s: member %s removed (rebalance timeout)", group, member)
        state = decision.state
        if state is not None:
            log.info(
                "group %s: %s, group epoch %d, %d members",
                group,
                state.state.value,
                state.group_epoch,
                len(state.target_assignment),
            )


def _named_members(records: GroupRecords) -> set[str]:
    """The members the stored state was computed with (they must still be gone if gone)."""
    state = records.state
    if state is None:
        return set()
    return set(state.subscriptions) | set(state.target_assignment) | set(state.revoking_since_ms)


def _task(coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    return asyncio.get_running_loop().create_task(coroutine)


def _raise_if_cancelling(exc: BaseException | None) -> None:
    """A retry loop must not outlive a cancel that surfaced as a store error."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError from exc
