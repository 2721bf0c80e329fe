"""``GroupWatch``: one consumer group's keys (``groups/<g>/``) followed by a prefix watch, for a
proxy holding some of the group's members.

It loads the prefix with a range read and follows it from the read's revision + 1, so no change
is missed between the two; a watch that falls behind etcd's compaction reloads, a broken one is
reopened after a backoff from where it stopped (``live`` is false meanwhile: a holder then
checks etcd itself). It keeps:

- the group's state and the state key's mod_revision, so that what the state grants a member
  (``grant``) needs no etcd read;
- per member, what was last seen of its record and of its positions record (``seen``): the
  revision of each one's last change, whether the record exists, and the positions record
  (its holder, and the proxy asking for it).

``revision`` is the newest revision the watch reflects for the group's keys. After every
change it calls ``listener(member_id)`` (``None`` after a load: any member may have changed)
and wakes ``wait``-ers. A malformed state counts as none. Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import NamedTuple

from pydantic import ValidationError

from yak.clock import Clock
from yak.errors import MetadataStoreError, RevisionCompactedError
from yak.metadata.keyspace import KeyKind, Keyspace
from yak.metadata.models import GroupState
from yak.metadata.store import EventKind, KeyValue, MetadataStore, WatchEvent
from yak_rest_proxy.consume.holding.member_store import grant_of, stored_positions
from yak_rest_proxy.consume.membership.member_state import NO_POSITIONS, Grant, StoredPositions

__all__ = ["GroupWatch", "Seen"]

log = logging.getLogger(__name__)

_RETRY_MIN_S = 0.1
_RETRY_MAX_S = 5.0


class Seen(NamedTuple):
    """What a group watch last saw of one member's keys."""

    #: The member record's mod_revision (0: there is none).
    member_revision: int = 0
    #: The revision of the record's last change (a put or a delete; a load's revision).
    member_changed: int = 0
    positions: StoredPositions = NO_POSITIONS
    positions_changed: int = 0

    @property
    def changed(self) -> int:
        return max(self.member_changed, self.positions_changed)


class GroupWatch:
    """Follows one group's keys; see the module docstring."""

    def __init__(
        self,
        store: MetadataStore,
        keyspace: Keyspace,
        group: str,
        *,
        clock: Clock,
        listener: Callable[[str | None], None],
    ) -> None:
        self.group = group
        self._store = store
        self._keyspace = keyspace
        self._clock = clock
        self._listener = listener
        self._prefix = keyspace.group_prefix(group)
        self._state: GroupState | None = None
        self.state_revision = 0
        self._seen: dict[str, Seen] = {}
        self.revision = 0
        self.live = False
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Load and follow in the background (``live`` once loaded and watching)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._follow())

    async def stop(self) -> None:
        task, self._task = self._task, None
        self.live = False
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def grant(self, member_id: str) -> Grant:
        """What the state grants ``member_id``, as of ``revision``."""
        return grant_of(self._state, self.state_revision, self.revision, member_id)

    def seen(self, member_id: str) -> Seen:
        return self._seen.get(member_id, Seen())

    async def wait(self, ready: Callable[[], bool], timeout_s: float) -> bool:
        """Until ``ready()`` holds after a change (True) or ``timeout_s`` passed (False)."""
        deadline = self._clock.monotonic() + timeout_s
        while not ready():
            left = deadline - self._clock.monotonic()
            if left <= 0:
                return False
            changed = asyncio.ensure_future(self._changed.wait())
            timer = asyncio.ensure_future(self._clock.sleep(left))
            try:
                await asyncio.wait((changed, timer), return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
                timer.cancel()
        return True

    # -- following ----------------------------------------------------------------------------

    async def _follow(self) -> None:
        delay, load = _RETRY_MIN_S, True
        while True:
            try:
                if load:
                    await self._load()
                    load = False
                async with self._store.watch_prefix(self._prefix, self.revision + 1) as watch:
                    _raise_if_cancelling(None)
                    self.live, delay = True, _RETRY_MIN_S
                    async for event in watch:
                        self._apply(event)
                self.live = False
            except RevisionCompactedError:
                log.warning("group %s: watch fell behind compaction; reloading", self.group)
                self.live, load = False, True
            except MetadataStoreError as exc:
                _raise_if_cancelling(exc)
                self.live = False
                log.warning(
                    "group %s: watch failed (%s); retrying in %.1f s", self.group, exc, delay
                )
                await self._clock.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX_S)

    async def _load(self) -> None:
        result = await self._store.range_prefix(self._prefix)
        gone = set(self._seen)
        self._state, self.state_revision = None, 0
        self._seen = {m: Seen(0, result.revision, NO_POSITIONS, result.revision) for m in gone}
        for kv in result.kvs:
            self._put(kv)
        self.revision = result.revision
        self._notify(None)

    def _apply(self, event: WatchEvent) -> None:
        self.revision = max(self.revision, event.mod_revision)
        if event.kind is EventKind.PUT:
            kv = KeyValue(event.key, event.value, 0, event.mod_revision, 0)
            member = self._put(kv)
        else:
            member = self._delete(event.key, event.mod_revision)
        self._notify(member)

    def _put(self, kv: KeyValue) -> str | None:
        parsed = self._keyspace.parse(kv.key)
        if parsed is None:
            return None
        if parsed.kind is KeyKind.GROUP_STATE:
            try:
                self._state = GroupState.decode(kv.value)
            except ValidationError as exc:
                log.error("group %s: ignoring a malformed state: %s", self.group, exc)
                self._state = None
            self.state_revision = kv.mod_revision
            return None
        member = parsed.member
        if member is None:
            return None
        seen = self.seen(member)
        if parsed.kind is KeyKind.GROUP_MEMBER:
            self._seen[member] = seen._replace(
                member_revision=kv.mod_revision, member_changed=kv.mod_revision
            )
        elif parsed.kind is KeyKind.GROUP_POSITIONS:
            self._seen[member] = seen._replace(
                positions=stored_positions(kv), positions_changed=kv.mod_revision
            )
        return member

    def _delete(self, key: bytes, revision: int) -> str | None:
        parsed = self._keyspace.parse(key)
        if parsed is None:
            return None
        if parsed.kind is KeyKind.GROUP_STATE:
            self._state, self.state_revision = None, 0
            return None
        member = parsed.member
        if member is None:
            return None
        seen = self.seen(member)
        if parsed.kind is KeyKind.GROUP_MEMBER:
            self._seen[member] = seen._replace(member_revision=0, member_changed=revision)
        elif parsed.kind is KeyKind.GROUP_POSITIONS:
            self._seen[member] = seen._replace(positions=NO_POSITIONS, positions_changed=revision)
        return member

    def _notify(self, member: str | None) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        self._listener(member)


def _raise_if_cancelling(exc: BaseException | None) -> None:
    """A retry loop must not outlive a cancel that surfaced as a store error."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError from exc
