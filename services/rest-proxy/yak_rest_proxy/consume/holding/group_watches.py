"""``GroupWatches``: one ``GroupWatch`` per group in which this proxy holds members, opened by
the first member held and stopped once the last one is let go (a count of references per group).

Every change a watch sees is passed on as ``listener(group, member_id)`` (``member_id`` None:
any member of the group may have changed). A watch stops in the background (``tasks``) when
its count drops to zero; ``stop`` stops every watch still open. Single event loop.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from yak.clock import Clock
from yak.metadata.keyspace import Keyspace
from yak.metadata.store import MetadataStore
from yak_rest_proxy.consume.holding.group_watch import GroupWatch
from yak_rest_proxy.consume.holding.tasks import BackgroundTasks

__all__ = ["GroupWatches"]


class GroupWatches:
    """The group watches of the held members; see the module docstring."""

    def __init__(
        self,
        metadata: MetadataStore,
        keyspace: Keyspace,
        *,
        clock: Clock,
        tasks: BackgroundTasks,
        listener: Callable[[str, str | None], None],
    ) -> None:
        self._metadata = metadata
        self._keyspace = keyspace
        self._clock = clock
        self._tasks = tasks
        self._listener = listener
        self._watches: dict[str, GroupWatch] = {}
        self._refs: Counter[str] = Counter()

    def open(self, group: str) -> GroupWatch:
        """The group's watch (started if it was not open), with one more reference on it."""
        watch = self._watches.get(group)
        if watch is None:
            watch = GroupWatch(
                self._metadata,
                self._keyspace,
                group,
                clock=self._clock,
                listener=lambda member_id: self._listener(group, member_id),
            )
            self._watches[group] = watch
            watch.start()
        self._refs[group] += 1
        return watch

    def close(self, group: str) -> None:
        """Drop one reference; the last one stops the watch."""
        self._refs[group] -= 1
        if self._refs[group] <= 0:
            del self._refs[group]
            watch = self._watches.pop(group, None)
            if watch is not None:
                self._tasks.spawn(watch.stop())

    async def stop(self) -> None:
        for watch in list(self._watches.values()):
            await watch.stop()
        self._watches.clear()
        self._refs.clear()
