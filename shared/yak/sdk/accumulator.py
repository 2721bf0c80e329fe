"""``BatchQueue``: one partition's records waiting to be sent, grouped in producer batches.

Kafka's ``RecordAccumulator``, per partition and without I/O: ``append`` adds a record to the
last open batch, or starts a new one when that batch holds ``max_records`` records or the
record would take it past ``max_bytes`` (a record larger than ``max_bytes`` gets a batch of its
own). ``ready_at`` says when the head batch may be sent: at once when it is full, when more
batches wait behind it, when the caller flushes, or when the caller says nothing is in flight
(``idle``: adaptive linger, an idle producer never waits); else ``linger_ms`` after it was
started — the upper bound of the wait behind requests in flight. Times are milliseconds of
any monotonic clock the caller chooses. A batch that was not written may be put back at the
head (``push_front``), e.g. the two halves of a batch the broker found too large. Not
thread-safe: one event loop owns a queue.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from yak.sdk.idempotence import BatchStamp

__all__ = ["BatchQueue", "ProducerBatch"]

T = TypeVar("T")


@dataclass(slots=True)
class ProducerBatch(Generic[T]):
    """Records bound for one partition in one request.

    ``stamp`` is the idempotent identity (producer id, epoch, base sequence) the batch got when
    first sent; every retry sends it unchanged, so the broker can recognise a duplicate.
    ``payload`` is the request body built for that stamp (the encoded record batch), kept so a
    retry sends the very same bytes; it goes with the stamp.
    """

    items: list[T]
    size: int
    created_ms: float
    stamp: BatchStamp | None = None
    attempts: int = 0
    sizes: list[int] = field(default_factory=list)
    payload: bytes | None = None

    def split(self) -> tuple[ProducerBatch[T], ProducerBatch[T]]:
        """Two unstamped halves, in order (for a batch of at least two records)."""
        if len(self.items) < 2:
            raise ValueError("a batch of one record cannot be split")
        half = len(self.items) // 2
        first, second = self.sizes[:half], self.sizes[half:]
        return (
            ProducerBatch(self.items[:half], sum(first), self.created_ms, sizes=first),
            ProducerBatch(self.items[half:], sum(second), self.created_ms, sizes=second),
        )


class BatchQueue(Generic[T]):
    """The batches of one partition, oldest first (see the module docstring)."""

    def __init__(self, max_records: int, max_bytes: int) -> None:
        if max_records < 1 or max_bytes < 1:
            raise ValueError("a batch holds at least one record and one byte")
        self._max_records = max_records
        self._max_bytes = max_bytes
        self._batches: deque[ProducerBatch[T]] = deque()

    def __len__(self) -> int:
        """Records waiting, in every batch."""
        return sum(len(b.items) for b in self._batches)

    @property
    def batches(self) -> int:
        return len(self._batches)

    def _full(self, batch: ProducerBatch[T]) -> bool:
        return len(batch.items) >= self._max_records or batch.size >= self._max_bytes

    def append(self, item: T, size: int, now_ms: float) -> None:
        """Add a record of ``size`` bytes to the open batch, or to a new one."""
        last = self._batches[-1] if self._batches else None
        if (
            last is None
            or len(last.items) >= self._max_records
            or last.size + size > self._max_bytes
        ):
            last = ProducerBatch([], 0, now_ms)
            self._batches.append(last)
        last.items.append(item)
        last.sizes.append(size)
        last.size += size

    def ready_at(
        self, linger_ms: float, flushing: bool = False, idle: bool = False
    ) -> float | None:
        """When the head batch may be sent (a time in the past: now); None if nothing waits."""
        if not self._batches:
            return None
        head = self._batches[0]
        if flushing or idle or len(self._batches) > 1 or self._full(head):
            return head.created_ms
        return head.created_ms + linger_ms

    def pop(self) -> ProducerBatch[T]:
        """Take the head batch (``IndexError`` if there is none)."""
        return self._batches.popleft()

    def push_front(self, batches: Iterable[ProducerBatch[T]]) -> None:
        """Put batches back at the head, in the given order, to be sent before the rest."""
        self._batches.extendleft(reversed(list(batches)))
