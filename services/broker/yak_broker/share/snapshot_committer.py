"""Group commit of share-partition snapshots: one ``ShareStateStore.save`` for every snapshot
handed in while the previous save was in flight.

``SnapshotCommitter.commit(key, snapshot)`` returns once that snapshot is durable (or raises
the save's error). While one save is in flight, the snapshots that arrive wait together and go
in the next save, newest per key (docs/decisions.md: "all acquisitions and acknowledgements
of the requests that arrived meanwhile share one acks=all produce"). So the number of saves
follows the store's latency, not the request rate. A None snapshot is a tombstone (the
manager's deletion sweep): going through the same queue, it lands after any snapshot of its
key already handed in, so a save in flight cannot bring a deleted key back.

Ordering: a key's snapshots are saved in commit order, and a commit never answers before a
save that began after it was handed in has succeeded; a failed save fails every commit it
carried (their drivers roll back to their last durable snapshot). The drivers commit one
snapshot of a key at a time, so "newest per key" never drops a snapshot anybody waits on
without saving a newer one in its place.

Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib

from yak_broker.share.state_store import SharePartitionKey, ShareStateStore

__all__ = ["SnapshotCommitter"]


class SnapshotCommitter:
    """Batches snapshots into the store's saves (see the module doc)."""

    def __init__(self, store: ShareStateStore) -> None:
        self._store = store
        self._pending: dict[SharePartitionKey, bytes | None] = {}
        self._done: asyncio.Future[None] | None = None
        self._flusher: asyncio.Task[None] | None = None
        #: Saves done (tests, metrics).
        self.saves = 0

    async def commit(self, key: SharePartitionKey, snapshot: bytes | None) -> None:
        """Make ``snapshot`` (None: a tombstone) durable as ``key``'s latest; raises the
        save's error."""
        self._pending[key] = snapshot
        if self._done is None:
            self._done = asyncio.get_running_loop().create_future()
        done = self._done
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush(), name="share-state-commit")
        await asyncio.shield(done)

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, {}
                done, self._done = self._done, None
                assert done is not None
                try:
                    await self._store.save(batch)
                except asyncio.CancelledError:
                    done.cancel()
                    raise
                except Exception as exc:  # the store's failure is every waiter's answer
                    done.set_exception(exc)
                    done.exception()  # retrieved: a waiter that was cancelled leaves no warning
                else:
                    self.saves += 1
                    done.set_result(None)
        finally:
            self._flusher = None

    async def close(self) -> None:
        """Stop the flusher (commits in flight fail with CancelledError)."""
        flusher, self._flusher = self._flusher, None
        if flusher is not None:
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flusher
        if self._done is not None and not self._done.done():
            self._done.cancel()
        self._done = None
        self._pending.clear()
