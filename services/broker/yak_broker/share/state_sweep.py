"""The deletion sweep: tombstones for the state of share groups that are gone.

A share group's state is one snapshot per share-partition in ``__yak_share_state``, under a
key that names the group's incarnation (``SharePartitionKey``; state_store's module doc). When
a group is marked ``deleting``, disappears, or comes back as a new incarnation, its old keys
must be tombstoned, or compaction keeps them for ever. The coordinator does not know which
share-partitions have state; the partitions' leaders do (docs: share_group_admin's contract).

**Which keys a broker tombstones** (``stale_keys``, pure): every key of the group that holds
a snapshot — whether or not this broker holds its share-partition in memory — whose
incarnation is not the group's live one (none when the group is gone or deleting), and whose
topic partition this broker leads now. "Holds a snapshot" is asked of the store after reading
*every* state partition to its end (``ShareStateStore.keys``): a leader that never served the
partition since it took over still finds the keys. So each key is tombstoned by one broker,
its partition's leader, and by the next one if leadership moves mid-sweep.

**How far it goes, and what is left.** A key whose topic partition has no leader at the time
(all replicas down) or whose topic was deleted is left; so is a key written by a driver whose
load raced the deletion. Each later change of the same group's record (deleted again, created
again) sweeps again and finds them; nothing sweeps them otherwise. A sweep that fails (the
state topic unavailable) is retried ``attempts`` times, ``retry_s`` apart, then given up with a
warning until the next change.

**Writes** go through the ``SnapshotCommitter`` as None snapshots, so a tombstone lands after
any snapshot of its key that was already handed in (a driver closed mid-save).

One sweep per group at a time: a request for a group whose sweep is running makes it run
once more after. Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable

from yak.clock import Clock
from yak.errors import YakError
from yak_broker.share.snapshot_committer import SnapshotCommitter
from yak_broker.share.state_store import SharePartitionKey, ShareStateStore

__all__ = ["StateSweeper", "stale_keys"]

_log = logging.getLogger(__name__)


def stale_keys(
    keys: Iterable[SharePartitionKey],
    live_incarnation: int | None,
    leads: Callable[[SharePartitionKey], bool],
) -> list[SharePartitionKey]:
    """The keys this broker tombstones (see the module doc)."""
    return [k for k in keys if k.incarnation != live_incarnation and leads(k)]


class StateSweeper:
    """Runs deletion sweeps per group; see the module doc."""

    def __init__(
        self,
        store: ShareStateStore,
        committer: SnapshotCommitter,
        *,
        live_incarnation: Callable[[str], int | None],
        leads: Callable[[SharePartitionKey], bool],
        clock: Clock,
        attempts: int = 3,
        retry_s: float = 1.0,
    ) -> None:
        self._store = store
        self._committer = committer
        self._live = live_incarnation
        self._leads = leads
        self._clock = clock
        self._attempts = attempts
        self._retry_s = retry_s
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self.closed = False
        #: Tombstones written so far (tests, metrics).
        self.tombstones = 0

    def sweep(self, group: str) -> None:
        """Sweep ``group`` soon (once more after the running sweep, if one runs)."""
        if self.closed:
            return
        if group in self._tasks:
            self._again.add(group)
            return
        self._tasks[group] = asyncio.create_task(self._run(group), name=f"share-sweep-{group}")

    async def idle(self) -> None:
        """Return once no sweep runs (tests)."""
        while self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    async def close(self) -> None:
        self.closed = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self, group: str) -> None:
        try:
            while True:
                self._again.discard(group)
                await self._with_retries(group)
                if group not in self._again:
                    return
        finally:
            self._tasks.pop(group, None)
            self._again.discard(group)

    async def _with_retries(self, group: str) -> None:
        for attempt in range(1, self._attempts + 1):
            try:
                await self._sweep_once(group)
                return
            except YakError as exc:
                if attempt == self._attempts:
                    _log.warning("share group %s: state not swept: %s", group, exc)
                    return
                await self._clock.sleep(self._retry_s)

    async def _sweep_once(self, group: str) -> None:
        keys = await self._store.keys(group)
        doomed = stale_keys(keys, self._live(group), self._leads)
        if not doomed:
            return
        await asyncio.gather(*(self._committer.commit(k, None) for k in doomed))
        self.tombstones += len(doomed)
        _log.info("share group %s: %d share-partition states tombstoned", group, len(doomed))
