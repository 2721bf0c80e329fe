"""Group commit of share-partition snapshots: one ``ShareStateStore.save`` for every snapshot
handed in while the previous save was in flight.

``SnapshotCommitter.submit(key, snapshot)`` hands a snapshot in and returns a future that
resolves once it is durable (or fails with the save's error); ``commit`` awaits it. While one
save is in flight, the snapshots that arrive wait together and go in the next save, newest
per key (docs/decisions.md: "all acquisitions and acknowledgements of the requests that
arrived meanwhile share one acks=all produce"). So the number of saves follows the store's
latency, not the request rate. A None snapshot is a tombstone (the manager's deletion sweep):
going through the same queue, it lands after any snapshot of its key already handed in, so a
save in flight cannot bring a deleted key back.

Ordering: a key's snapshots are saved in the order they were handed in; a newer one handed in
before the older one's save began replaces it and shares its future (the newer holds all of
the older's changes: a driver snapshots its whole machine). A driver may so have several
snapshots of a key waiting, one in flight and one queued. A failed save fails every future it
carried **and the queued snapshots of its keys**, at once, before the next save begins: they
stand on the failed one, so none of them is saved, and the drivers (whose last future failed)
stop submitting; a key's snapshots after a failure come only from a driver that loaded the
store again.

Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib

from yak_broker.share.state_store import SharePartitionKey, ShareStateStore

__all__ = ["SnapshotCommitter"]

_Entry = tuple[bytes | None, asyncio.Future[None]]


class SnapshotCommitter:
    """Batches snapshots into the store's saves (see the module doc)."""

    def __init__(self, store: ShareStateStore) -> None:
        self._store = store
        self._pending: dict[SharePartitionKey, _Entry] = {}
        self._flusher: asyncio.Task[None] | None = None
        #: Saves done (tests, metrics).
        self.saves = 0

    def submit(self, key: SharePartitionKey, snapshot: bytes | None) -> asyncio.Future[None]:
        """Queue ``snapshot`` (None: a tombstone) as ``key``'s latest; the future resolves
        when it is durable, or fails with the save's error."""
        queued = self._pending.get(key)
        if queued is None:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        else:
            done = queued[1]
        self._pending[key] = (snapshot, done)
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush(), name="share-state-commit")
        return done

    async def commit(self, key: SharePartitionKey, snapshot: bytes | None) -> None:
        """``submit`` and wait until durable; raises the save's error."""
        await asyncio.shield(self.submit(key, snapshot))

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, {}
                try:
                    await self._store.save({key: raw for key, (raw, _) in batch.items()})
                except asyncio.CancelledError:
                    for _, done in batch.values():
                        done.cancel()
                    raise
                except Exception as exc:  # the store's failure is every waiter's answer
                    failed = [done for _, done in batch.values()]
                    failed += [self._pending.pop(k)[1] for k in batch if k in self._pending]
                    for done in failed:
                        if not done.done():
                            done.set_exception(exc)
                            done.exception()  # retrieved: a waiter that went leaves no warning
                else:
                    self.saves += 1
                    for _, done in batch.values():
                        if not done.done():
                            done.set_result(None)
        finally:
            self._flusher = None

    async def close(self) -> None:
        """Stop the flusher (commits in flight and queued fail with CancelledError)."""
        flusher, self._flusher = self._flusher, None
        if flusher is not None:
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flusher
        for _, done in self._pending.values():
            done.cancel()
        self._pending.clear()
