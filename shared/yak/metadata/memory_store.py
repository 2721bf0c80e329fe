"""An in-memory ``MetadataStore`` with etcd's semantics, for tests of pure logic.

State: a map key -> ``KeyValue``, one global revision counter (1 when empty, like a fresh
etcd), the leases with their deadlines, and a bounded history of change events. A watch from a
revision the history still holds replays it, then follows live changes; a watch from an older
revision fails with ``RevisionCompactedError``, as after an etcd compaction. Dropping the oldest
events when the history is full counts as compacting past them.

Leases expire on the injected ``Clock``: every operation first expires the leases that are due,
and a timer task sleeping on the clock until the next deadline expires them even when nobody
calls the store, so a watcher sees the DELETE events (with ``FakeClock``, when the test
advances it). Not thread-safe: use it from one event loop; nothing in it blocks.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from yak.clock import Clock, SystemClock
from yak.errors import MetadataStoreError, RevisionCompactedError
from yak.metadata.store import (
    Compare,
    DeleteOp,
    DeleteResponse,
    EventKind,
    GetResponse,
    KeyLike,
    KeyValue,
    LeaseExpiredError,
    Op,
    OpResponse,
    PutOp,
    PutResponse,
    RangeResult,
    TxnResult,
    Watch,
    WatchEvent,
    as_key,
)

__all__ = ["MemoryMetadataStore"]


@dataclass(slots=True)
class _Lease:
    lease_id: int
    ttl_s: int
    deadline: float
    keys: set[bytes] = field(default_factory=set)


class _MemoryWatch(Watch):
    def __init__(self, store: MemoryMetadataStore, prefix: bytes, start: int | None) -> None:
        super().__init__(prefix, start)
        self._store = store

    async def _start(self) -> None:
        self._store._attach(self)

    async def _stop(self) -> None:
        self._store._detach(self)

    def offer(self, event: WatchEvent) -> None:
        if event.key.startswith(self.prefix) and (
            self.start_revision is None or event.mod_revision >= self.start_revision
        ):
            self._push(event)

    def fail(self, error: MetadataStoreError) -> None:
        self._finish(error)


class MemoryMetadataStore:
    """A ``MetadataStore`` held in memory; time comes from ``clock`` (``FakeClock`` in tests).

    ``history_limit`` bounds the change events kept for watches from past revisions. Call
    ``aclose()`` when done: it stops the lease timer task and ends open watches.
    """

    def __init__(self, clock: Clock | None = None, *, history_limit: int = 10_000) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._history_limit = history_limit
        self._kvs: dict[bytes, KeyValue] = {}
        self._revision = 1
        self._compact_revision = 0
        self._history: deque[WatchEvent] = deque()
        self._watches: set[_MemoryWatch] = set()
        self._leases: dict[int, _Lease] = {}
        self._lease_ids = itertools.count(0x7A4B_0001)
        self._timer: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def revision(self) -> int:
        """The current store revision."""
        return self._revision

    async def get(self, key: KeyLike) -> KeyValue | None:
        self._check()
        return self._kvs.get(as_key(key))

    async def range_prefix(self, prefix: KeyLike) -> RangeResult:
        self._check()
        kvs = tuple(self._kvs[k] for k in self._matching(as_key(prefix), prefix=True))
        return RangeResult(kvs, self._revision)

    async def put(self, key: KeyLike, value: bytes, *, lease: int | None = None) -> int:
        result = await self.txn((), [PutOp(key, value, lease)])
        return result.revision

    async def delete(self, key: KeyLike) -> bool:
        return await self._delete_op(key, prefix=False) > 0

    async def delete_prefix(self, prefix: KeyLike) -> int:
        return await self._delete_op(prefix, prefix=True)

    async def _delete_op(self, key: KeyLike, *, prefix: bool) -> int:
        result = await self.txn((), [DeleteOp(key, prefix=prefix)])
        response = result.responses[0]
        assert isinstance(response, DeleteResponse)
        return response.deleted

    async def txn(
        self, compares: Sequence[Compare], on_success: Sequence[Op], on_failure: Sequence[Op] = ()
    ) -> TxnResult:
        self._check()
        succeeded = all(self._holds(c) for c in compares)
        ops = on_success if succeeded else on_failure
        _check_like_etcd(compares, on_success, on_failure)
        for op in ops:  # validate before changing anything: a transaction is all or nothing
            if isinstance(op, PutOp) and op.lease and op.lease not in self._leases:
                raise LeaseExpiredError(f"lease {op.lease:#x} not found", lease_id=op.lease)
        revision = self._revision + 1
        events: list[WatchEvent] = []
        responses: list[OpResponse] = []
        for op in ops:
            if isinstance(op, PutOp):
                events.append(self._put(op, revision))
                responses.append(PutResponse(revision))
            elif isinstance(op, DeleteOp):
                deleted = self._delete(self._matching(op.key, prefix=op.prefix), revision)
                events += deleted
                responses.append(DeleteResponse(len(deleted)))
            else:
                keys = self._matching(op.key, prefix=op.prefix)
                responses.append(GetResponse(tuple(self._kvs[k] for k in keys)))
        self._commit(events)
        return TxnResult(succeeded, self._revision, tuple(responses))

    async def grant_lease(self, ttl_s: int) -> int:
        self._check()
        if ttl_s <= 0:
            raise ValueError(f"lease TTL must be positive, got {ttl_s}")
        lease_id = next(self._lease_ids)
        self._leases[lease_id] = _Lease(lease_id, ttl_s, self._clock.monotonic() + ttl_s)
        self._rearm()
        return lease_id

    async def keep_alive_once(self, lease_id: int) -> int:
        self._check()
        lease = self._leases.get(lease_id)
        if lease is None:
            raise LeaseExpiredError(f"lease {lease_id:#x} expired or unknown", lease_id=lease_id)
        lease.deadline = self._clock.monotonic() + lease.ttl_s
        return lease.ttl_s

    async def revoke_lease(self, lease_id: int) -> None:
        self._check()
        lease = self._leases.pop(lease_id, None)
        if lease is not None:
            self._drop(lease)

    def watch_prefix(self, prefix: KeyLike, start_revision: int | None = None) -> Watch:
        return _MemoryWatch(self, as_key(prefix), start_revision)

    async def compact(self, revision: int) -> None:
        self._check()
        if revision > self._revision:
            raise MetadataStoreError(
                f"cannot compact at future revision {revision} (current {self._revision})"
            )
        if revision <= self._compact_revision:
            raise RevisionCompactedError(
                f"revision {revision} is already compacted", compact_revision=revision
            )
        self._compact_revision = revision
        while self._history and self._history[0].mod_revision < revision:
            self._history.popleft()

    async def aclose(self) -> None:
        self._closed = True
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            await asyncio.wait([timer])
        watches, self._watches = self._watches, set()
        for watch in watches:
            watch.fail(MetadataStoreError("the metadata store was closed"))

    # -- internals ----------------------------------------------------------------------------

    def _check(self) -> None:
        if self._closed:
            raise MetadataStoreError("the metadata store is closed")
        self._expire_due()

    def _holds(self, compare: Compare) -> bool:
        if compare.prefix:
            keys = self._matching(compare.key, prefix=True)
            return compare.holds_all([self._kvs[k] for k in keys])
        return compare.holds(self._kvs.get(compare.key))

    def _matching(self, key: bytes, *, prefix: bool) -> list[bytes]:
        if not prefix:
            return [key] if key in self._kvs else []
        return sorted(k for k in self._kvs if k.startswith(key))

    def _put(self, op: PutOp, revision: int) -> WatchEvent:
        old = self._kvs.get(op.key)
        if old is not None:
            self._detach_lease(old)
        self._kvs[op.key] = KeyValue(
            key=op.key,
            value=op.value,
            create_revision=old.create_revision if old is not None else revision,
            mod_revision=revision,
            version=old.version + 1 if old is not None else 1,
            lease=op.lease or 0,
        )
        if op.lease:
            self._leases[op.lease].keys.add(op.key)
        return WatchEvent(EventKind.PUT, op.key, op.value, revision)

    def _delete(self, keys: Iterable[bytes], revision: int) -> list[WatchEvent]:
        events = []
        for key in keys:
            self._detach_lease(self._kvs.pop(key))
            events.append(WatchEvent(EventKind.DELETE, key, b"", revision))
        return events

    def _detach_lease(self, kv: KeyValue) -> None:
        lease = self._leases.get(kv.lease)
        if lease is not None:
            lease.keys.discard(kv.key)

    def _commit(self, events: list[WatchEvent]) -> None:
        """Publish the changes of one write: bump the revision, record history, notify."""
        if not events:
            return
        self._revision += 1
        self._history.extend(events)
        while len(self._history) > self._history_limit:
            dropped = self._history.popleft()
            self._compact_revision = max(self._compact_revision, dropped.mod_revision + 1)
        for watch in list(self._watches):
            for event in events:
                watch.offer(event)

    def _drop(self, lease: _Lease) -> None:
        self._commit(self._delete(sorted(lease.keys), self._revision + 1))

    def _expire_due(self) -> None:
        now = self._clock.monotonic()
        due = sorted(
            (lease for lease in self._leases.values() if lease.deadline <= now),
            key=lambda lease: lease.deadline,
        )
        for lease in due:
            del self._leases[lease.lease_id]
            self._drop(lease)

    def _rearm(self) -> None:
        """(Re)start the timer that expires the next lease when the clock reaches it."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._leases and not self._closed:
            deadline = min(lease.deadline for lease in self._leases.values())
            self._timer = asyncio.get_running_loop().create_task(self._expire_at(deadline))

    async def _expire_at(self, deadline: float) -> None:
        await self._clock.sleep(max(deadline - self._clock.monotonic(), 0.0))
        self._timer = None
        self._expire_due()
        self._rearm()

    def _attach(self, watch: _MemoryWatch) -> None:
        self._check()
        start = watch.start_revision
        if start is not None:
            if start < self._compact_revision:
                watch.fail(
                    RevisionCompactedError(
                        f"revision {start} is compacted (oldest kept: {self._compact_revision})",
                        compact_revision=self._compact_revision,
                        start_revision=start,
                    )
                )
                return
            for event in self._history:
                watch.offer(event)
        self._watches.add(watch)

    def _detach(self, watch: _MemoryWatch) -> None:
        self._watches.discard(watch)


#: etcd's default ``--max-txn-ops``.
MAX_TXN_OPS = 128


def _check_like_etcd(
    compares: Sequence[Compare], on_success: Sequence[Op], on_failure: Sequence[Op]
) -> None:
    """Refuse what a real etcd server refuses, so unit tests catch it: more than
    ``MAX_TXN_OPS`` operations in a branch, or a key written twice in one branch."""
    for branch in (on_success, on_failure):
        if max(len(compares), len(branch)) > MAX_TXN_OPS:
            raise MetadataStoreError("etcdserver: too many operations in txn request")
        written = [op.key for op in branch if isinstance(op, PutOp | DeleteOp)]
        if len(written) != len(set(written)):
            raise MetadataStoreError("etcdserver: duplicate key given in txn request")
