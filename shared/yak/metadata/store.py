"""The metadata store: the narrow interface Yak uses for etcd, owned by Yak.

Two implementations keep the same semantics: ``EtcdMetadataStore`` (``etcd_store.py``, the only
module that imports the etcd client) and ``MemoryMetadataStore`` (``memory_store.py``, for tests
of pure logic). One contract test suite runs against both.

Semantics (those of etcd v3):

- **Revisions.** The store has one revision counter for all keys. Every write that changes
  something (put, a delete that removed a key, a transaction with writes, a lease expiry that
  removed keys) bumps it by exactly one; all changes of that write carry the new revision. A
  key's ``create_revision`` is the revision that created it (0 = absent), ``mod_revision`` the
  revision of its last change, ``version`` the number of puts since it was created. A read
  reports the revision it reflects, so a cache can watch from ``revision + 1`` without a gap.
- **Keys and values** are bytes; keys may be passed as ``str`` (UTF-8). Range reads and watches
  take a key prefix and return keys in ascending byte order.
- **Transactions** (``txn``) compare-and-swap atomically: if every ``Compare`` holds, the
  ``on_success`` ops run, else the ``on_failure`` ops, all at one revision. A compare on the
  value of a missing key is false; other targets of a missing key compare as 0, so
  ``Compare.absent(key)`` (``create_revision == 0``) means "create only if absent". A compare
  over a prefix (etcd's ``range_end``) holds when it holds for every key under the prefix, and
  an empty prefix compares as one missing key: ``Compare.none_under(prefix)`` means "no key
  under it" (e.g. a group without member records).
- **Leases** expire ``ttl`` seconds after their grant or last keep-alive (etcd may raise a
  short TTL to its minimum, about 2 s). Expiry or revocation deletes every key attached to the
  lease at one revision, and watchers see DELETE events. ``keep_alive_once`` on an expired or
  unknown lease, and ``put`` with one, raise ``LeaseExpiredError``; revoking an unknown lease is
  a no-op. ``yak.metadata.lease_keeper.LeaseKeeper`` refreshes a lease in the
  background and reports its loss.
- **Watches** deliver every change under a prefix, in revision order, starting at
  ``start_revision`` (past events are replayed from the store's history) or, without one, at
  the first change after the watch is open. If ``start_revision`` is older than the history the
  store keeps (etcd compacted it), iteration raises ``RevisionCompactedError``: reload with a
  range read and watch again from its revision + 1. ``aclose()`` (or leaving ``async with``)
  stops a watch; its iterator then ends.
- **Failures.** Any failure to reach or use the store raises ``MetadataStoreError`` (retriable);
  a broken watch stream raises it from the iterator. Nothing else escapes an implementation.

Every method is a coroutine except ``watch_prefix``; one store instance serves any number of
concurrent tasks of one event loop.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import NamedTuple, Protocol, Self, TypeAlias, TypeVar

from yak.closing import AsyncClosing
from yak.errors import MetadataStoreError

__all__ = [
    "Compare",
    "CompareOp",
    "CompareTarget",
    "DeleteOp",
    "DeleteResponse",
    "EventKind",
    "GetOp",
    "GetResponse",
    "KeyLike",
    "KeyValue",
    "LeaseExpiredError",
    "MetadataStore",
    "Op",
    "OpResponse",
    "PutOp",
    "PutResponse",
    "RangeResult",
    "TxnResult",
    "Watch",
    "WatchEvent",
    "as_key",
]

KeyLike: TypeAlias = bytes | str


def as_key(key: KeyLike) -> bytes:
    """A key as bytes (``str`` keys are UTF-8 encoded)."""
    return key.encode() if isinstance(key, str) else bytes(key)


class LeaseExpiredError(MetadataStoreError):
    """The lease expired, was revoked or never existed; keys attached to it are gone."""

    code = "LEASE_EXPIRED"
    retriable = False


class KeyValue(NamedTuple):
    """One stored key with its revisions; ``lease`` is 0 when the key has none."""

    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int = 0


class RangeResult(NamedTuple):
    """The keys under a prefix in key order, and the store revision the read reflects."""

    kvs: tuple[KeyValue, ...]
    revision: int


class CompareTarget(Enum):
    """What a ``Compare`` looks at."""

    VALUE = "value"
    VERSION = "version"
    CREATE_REVISION = "create_revision"
    MOD_REVISION = "mod_revision"


class CompareOp(StrEnum):
    """How a ``Compare`` relates the stored field to its operand."""

    EQUAL = "=="
    NOT_EQUAL = "!="
    LESS = "<"
    GREATER = ">"


@dataclass(frozen=True, slots=True, init=False)
class Compare:
    """One condition of a transaction: ``<target of key> <op> <operand>``; with ``prefix``,
    of every key under ``key`` (see the module doc)."""

    key: bytes
    target: CompareTarget
    op: CompareOp
    operand: bytes | int
    prefix: bool

    def __init__(
        self,
        key: KeyLike,
        target: CompareTarget,
        op: CompareOp,
        operand: bytes | int,
        *,
        prefix: bool = False,
    ) -> None:
        if (target is CompareTarget.VALUE) != isinstance(operand, bytes):
            raise TypeError("a VALUE compare takes bytes, the other targets take an int")
        object.__setattr__(self, "key", as_key(key))
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "operand", operand)
        object.__setattr__(self, "prefix", prefix)

    @classmethod
    def value(cls, key: KeyLike, value: bytes, op: CompareOp = CompareOp.EQUAL) -> Compare:
        return cls(key, CompareTarget.VALUE, op, value)

    @classmethod
    def version(cls, key: KeyLike, version: int, op: CompareOp = CompareOp.EQUAL) -> Compare:
        return cls(key, CompareTarget.VERSION, op, version)

    @classmethod
    def create_revision(
        cls, key: KeyLike, revision: int, op: CompareOp = CompareOp.EQUAL
    ) -> Compare:
        return cls(key, CompareTarget.CREATE_REVISION, op, revision)

    @classmethod
    def mod_revision(cls, key: KeyLike, revision: int, op: CompareOp = CompareOp.EQUAL) -> Compare:
        return cls(key, CompareTarget.MOD_REVISION, op, revision)

    @classmethod
    def absent(cls, key: KeyLike) -> Compare:
        """True while ``key`` does not exist: "create only if absent"."""
        return cls.create_revision(key, 0)

    @classmethod
    def none_under(cls, prefix: KeyLike) -> Compare:
        """True while no key starts with ``prefix``."""
        return cls(prefix, CompareTarget.CREATE_REVISION, CompareOp.EQUAL, 0, prefix=True)

    def holds_all(self, kvs: Sequence[KeyValue]) -> bool:
        """Evaluate a prefix compare against the keys under it, as etcd does: every one must
        hold; none compares as one missing key."""
        return all(self.holds(kv) for kv in kvs) if kvs else self.holds(None)

    def holds(self, kv: KeyValue | None) -> bool:
        """Evaluate against the key's current state (``None`` = absent), as etcd does."""
        actual: bytes | int
        if self.target is CompareTarget.VALUE:
            if kv is None:
                return False
            actual = kv.value
        elif kv is None:
            actual = 0
        elif self.target is CompareTarget.VERSION:
            actual = kv.version
        elif self.target is CompareTarget.CREATE_REVISION:
            actual = kv.create_revision
        else:
            actual = kv.mod_revision
        operand = self.operand
        if isinstance(actual, bytes) and isinstance(operand, bytes):
            return _relate(actual, operand, self.op)
        if isinstance(actual, int) and isinstance(operand, int):
            return _relate(actual, operand, self.op)
        return False


_T = TypeVar("_T", bytes, int)


def _relate(actual: _T, operand: _T, op: CompareOp) -> bool:
    match op:
        case CompareOp.EQUAL:
            return actual == operand
        case CompareOp.NOT_EQUAL:
            return actual != operand
        case CompareOp.LESS:
            return actual < operand
        case CompareOp.GREATER:
            return actual > operand


@dataclass(frozen=True, slots=True, init=False)
class PutOp:
    """Transaction op: set ``key`` to ``value`` (attached to ``lease`` if given)."""

    key: bytes
    value: bytes
    lease: int | None

    def __init__(self, key: KeyLike, value: bytes, lease: int | None = None) -> None:
        object.__setattr__(self, "key", as_key(key))
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "lease", lease)


@dataclass(frozen=True, slots=True, init=False)
class DeleteOp:
    """Transaction op: delete ``key``, or every key under it when ``prefix`` is true."""

    key: bytes
    prefix: bool

    def __init__(self, key: KeyLike, *, prefix: bool = False) -> None:
        object.__setattr__(self, "key", as_key(key))
        object.__setattr__(self, "prefix", prefix)


@dataclass(frozen=True, slots=True, init=False)
class GetOp:
    """Transaction op: read ``key``, or every key under it when ``prefix`` is true."""

    key: bytes
    prefix: bool

    def __init__(self, key: KeyLike, *, prefix: bool = False) -> None:
        object.__setattr__(self, "key", as_key(key))
        object.__setattr__(self, "prefix", prefix)


Op: TypeAlias = PutOp | DeleteOp | GetOp


class PutResponse(NamedTuple):
    """Result of a ``PutOp``: the revision of the write."""

    revision: int


class DeleteResponse(NamedTuple):
    """Result of a ``DeleteOp``: how many keys it removed."""

    deleted: int


class GetResponse(NamedTuple):
    """Result of a ``GetOp``: the keys found, in key order."""

    kvs: tuple[KeyValue, ...]


OpResponse: TypeAlias = PutResponse | DeleteResponse | GetResponse


class TxnResult(NamedTuple):
    """Which branch ran, the store revision after it, and one response per op of that branch."""

    succeeded: bool
    revision: int
    responses: tuple[OpResponse, ...]


class EventKind(StrEnum):
    """What happened to a key."""

    PUT = "put"
    DELETE = "delete"


class WatchEvent(NamedTuple):
    """One change seen by a watch; a DELETE has an empty value and the deleting revision."""

    kind: EventKind
    key: bytes
    value: bytes
    mod_revision: int


class _End(NamedTuple):
    error: MetadataStoreError | None


class Watch(AsyncClosing):
    """A prefix watch: an async iterator of ``WatchEvent`` in revision order.

    Use it as ``async with store.watch_prefix(p, start_revision=r) as watch: async for ev in
    watch``. Entering opens it (``open()``; iterating opens it too); once open, no change is
    missed. ``aclose()`` may be called from any task: the iterator then ends at once, even for a
    task blocked waiting for the next event. A failure (compaction, lost connection) is raised
    by the iterator after the events received before it; then the iterator ends.

    Implementations subclass this, start and stop their source in ``_start``/``_stop`` and feed
    it with ``_push`` and ``_finish``. Events are buffered without bound until read.
    """

    def __init__(self, prefix: bytes, start_revision: int | None) -> None:
        self.prefix = prefix
        self.start_revision = start_revision if start_revision and start_revision > 0 else None
        self._queue: asyncio.Queue[WatchEvent | _End] = asyncio.Queue()
        self._opened = False
        self._closed = False
        self._stopped = False

    async def open(self) -> None:
        """Start watching; raises ``MetadataStoreError`` if the store cannot be reached."""
        if self._opened:
            return
        self._opened = True
        await self._start()

    async def aclose(self) -> None:
        """Stop watching and end the iterator; idempotent."""
        self._closed = True
        self._queue.put_nowait(_End(None))
        if not self._stopped:
            self._stopped = True
            if self._opened:
                await self._stop()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> WatchEvent:
        if not self._opened:
            await self.open()
        if self._closed:
            raise StopAsyncIteration
        item = await self._queue.get()
        if isinstance(item, WatchEvent):
            return item
        self._closed = True
        if item.error is not None:
            raise item.error
        raise StopAsyncIteration

    def _push(self, event: WatchEvent) -> None:
        """Deliver one event (implementations only)."""
        self._queue.put_nowait(event)

    def _finish(self, error: MetadataStoreError) -> None:
        """End the stream with ``error`` after the events already pushed (implementations)."""
        self._queue.put_nowait(_End(error))

    @abstractmethod
    async def _start(self) -> None:
        """Begin delivering events from ``start_revision``."""

    @abstractmethod
    async def _stop(self) -> None:
        """Release the source; no ``_push`` may follow."""


class MetadataStore(Protocol):
    """The operations Yak needs from etcd (see the module docstring for their semantics)."""

    async def get(self, key: KeyLike) -> KeyValue | None: ...

    async def range_prefix(self, prefix: KeyLike) -> RangeResult: ...

    async def put(self, key: KeyLike, value: bytes, *, lease: int | None = None) -> int:
        """Set ``key``; return the new store revision."""
        ...

    async def delete(self, key: KeyLike) -> bool:
        """Delete ``key``; return whether it existed."""
        ...

    async def delete_prefix(self, prefix: KeyLike) -> int:
        """Delete every key under ``prefix``; return how many there were."""
        ...

    async def txn(
        self, compares: Sequence[Compare], on_success: Sequence[Op], on_failure: Sequence[Op] = ()
    ) -> TxnResult: ...

    async def grant_lease(self, ttl_s: int) -> int:
        """Create a lease of ``ttl_s`` seconds; return its id."""
        ...

    async def keep_alive_once(self, lease_id: int) -> int:
        """Refresh a lease; return its TTL in seconds, or raise ``LeaseExpiredError``."""
        ...

    async def revoke_lease(self, lease_id: int) -> None:
        """End a lease now, deleting its keys; no-op if it is already gone."""
        ...

    def watch_prefix(self, prefix: KeyLike, start_revision: int | None = None) -> Watch:
        """Watch every key under ``prefix`` from ``start_revision`` (None or 0: from now)."""
        ...

    async def compact(self, revision: int) -> None:
        """Forget history before ``revision``; watches from older revisions fail afterwards."""
        ...

    async def aclose(self) -> None:
        """Release connections; open watches end with ``MetadataStoreError``."""
        ...
