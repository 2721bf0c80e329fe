"""Group commit of share-partition snapshots: per lane of the store, one
``ShareStateStore.save`` for every snapshot handed in while that lane's previous save was in
flight.

``SnapshotCommitter.submit(key, snapshot)`` hands a snapshot in and returns a future that
resolves once it is durable (or fails with the save's error); ``commit`` awaits it. While one
save of a lane is in flight, the snapshots of that lane that arrive wait together and go in
its next save, newest per key (docs/decisions.md: "all acquisitions and acknowledgements of
the requests that arrived meanwhile share one acks=all produce"). So the number of saves
follows the store's latency, not the request rate. **Lanes** (``ShareStateStore.lane``: the
state partition of a key, in the topic store) save independently: a snapshot waits for its own
lane's save in flight, not for the slowest partition of a save that spans them all. A None
snapshot is a tombstone (the manager's deletion sweep): going through the same queue, it lands
after any snapshot of its key already handed in, so a save in flight cannot bring a deleted
key back.

**Encoded when its save begins.** A snapshot may be handed in as a function that encodes it
(``Encode``): it is called once, when the save that carries it begins, so the inputs that
arrive while a save is in flight cost one encoding per save, not one each — a later input's
snapshot replaces the queued one anyway. What the function encodes then holds every change
applied before the hand-in (and maybe later ones: a driver's machine only moves forward, and
saving more of it is what the next hand-in would have done).

Ordering: a key is in one lane, and a lane's snapshots are saved in the order they were handed
in; a newer one handed in before the older one's save began replaces it and shares its future
(the newer holds all of the older's changes: a driver snapshots its whole machine). A driver
may so have several snapshots of a key waiting, one in flight and one queued. A failed save
fails every future it carried **and the queued snapshots of its keys**, at once, before the
lane's next save begins: they stand on the failed one, so none of them is saved, and the
drivers (whose last future failed) stop submitting; a key's snapshots after a failure come
only from a driver that loaded the store again.

``observe`` (optional) is told each save's duration in seconds, failed ones included (the
broker's ``yak_share_state_save_seconds``).

Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from yak_broker.share.state_store import SharePartitionKey, ShareStateStore

__all__ = ["Encode", "SnapshotCommitter"]

#: A snapshot encoded on demand (see the module doc).
Encode = Callable[[], bytes]
_Entry = tuple[bytes | Encode | None, asyncio.Future[None]]


class _Lane:
    """One lane's queue and its flusher task (None when idle)."""

    __slots__ = ("flusher", "pending")

    def __init__(self) -> None:
        self.pending: dict[SharePartitionKey, _Entry] = {}
        self.flusher: asyncio.Task[None] | None = None


class SnapshotCommitter:
    """Batches snapshots into the store's saves (see the module doc)."""

    def __init__(
        self, store: ShareStateStore, observe: Callable[[float], None] | None = None
    ) -> None:
        self._store = store
        self._observe = observe
        self._lanes: dict[int, _Lane] = {}
        #: Saves done (tests, metrics).
        self.saves = 0

    def submit(
        self, key: SharePartitionKey, snapshot: bytes | Encode | None
    ) -> asyncio.Future[None]:
        """Queue ``snapshot`` (None: a tombstone; a function: encoded when its save begins) as
        ``key``'s latest; the future resolves when it is durable, or fails with the save's
        error."""
        lane = self._lanes.get(number := self._store.lane(key))
        if lane is None:
            lane = self._lanes[number] = _Lane()
        queued = lane.pending.get(key)
        if queued is None:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        else:
            done = queued[1]
        lane.pending[key] = (snapshot, done)
        if lane.flusher is None:
            lane.flusher = asyncio.create_task(self._flush(lane), name=f"share-commit-{number}")
        return done

    async def commit(self, key: SharePartitionKey, snapshot: bytes | Encode | None) -> None:
        """``submit`` and wait until durable; raises the save's error."""
        await asyncio.shield(self.submit(key, snapshot))

    async def _flush(self, lane: _Lane) -> None:
        try:
            while lane.pending:
                batch, lane.pending = lane.pending, {}
                try:
                    await self._save(batch)
                except asyncio.CancelledError:
                    for _, done in batch.values():
                        done.cancel()
                    raise
                except Exception as exc:  # the store's failure is every waiter's answer
                    failed = [done for _, done in batch.values()]
                    failed += [lane.pending.pop(k)[1] for k in batch if k in lane.pending]
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
            lane.flusher = None

    async def _save(self, batch: dict[SharePartitionKey, _Entry]) -> None:
        started = time.perf_counter()
        try:
            encoded = {key: raw() if callable(raw) else raw for key, (raw, _) in batch.items()}
            await self._store.save(encoded)
        finally:
            if self._observe is not None:
                self._observe(time.perf_counter() - started)

    async def close(self) -> None:
        """Stop the flushers (commits in flight and queued fail with CancelledError)."""
        lanes, self._lanes = list(self._lanes.values()), {}
        for lane in lanes:
            flusher, lane.flusher = lane.flusher, None
            if flusher is not None:
                flusher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await flusher
            for _, done in lane.pending.values():
                done.cancel()
            lane.pending.clear()
