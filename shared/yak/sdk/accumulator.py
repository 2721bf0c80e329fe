"""``BatchQueue``: one partition's records waiting to be sent, grouped in producer batches.

Kafka's ``RecordAccumulator``, per partition and without I/O: ``append`` adds a record to the
last open batch, or starts a new one when that batch holds ``max_records`` records or the
record would take it past ``max_bytes`` (a record larger than ``max_bytes`` gets a batch of its
own). ``ready_at`` says when the head batch may be sent: at once when it is full, when more
batches wait behind it, when the caller flushes, or when the caller says nothing is in flight
(``idle``: adaptive linger, an idle producer never waits); else ``linger_ms`` after it was
started — the upper bound of the wait behind requests in flight. Times are milliseconds of
the monotonic ``clock`` the caller gives. A batch that was not written may be put back at the
head (``push_front``), e.g. the two halves of a batch the broker found too large. Not
thread-safe: one event loop owns a queue.

Appending is the producer's one per-record step, so it does no more than extend the open
batch's two lists (the records and their futures) and add to its size; what a record costs
beyond that — encoding, buffer space, resolving — is done per batch. ``append`` says whether
the sender should look again (a new batch was started, or the open one became full).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from yak.record import RecordInput
from yak.sdk.idempotence import BatchStamp
from yak.sdk.records import RecordMetadata

__all__ = ["RECORD_OVERHEAD", "BatchQueue", "ProducerBatch", "record_size"]

RECORD_OVERHEAD = 16  # bytes a record takes in a batch beyond its key, value and headers


def record_size(
    key: bytes | None, value: bytes | None, headers: tuple[tuple[str, bytes | None], ...]
) -> int:
    """Roughly the bytes a record takes in a batch (what ``max_bytes`` and the producer's
    buffer count)."""
    size = RECORD_OVERHEAD + len(key or b"") + len(value or b"")
    return size + sum(len(k) + len(v or b"") + 2 for k, v in headers)


@dataclass(slots=True)
class ProducerBatch:
    """Records bound for one partition in one request, and the future of each (in order).

    ``size`` is the sum of the records' ``record_size``: what the batch holds of the
    producer's buffer until it completes. ``stamp`` is the idempotent identity (producer id,
    epoch, base sequence) the batch got when first sent; every retry sends it unchanged, so the
    broker can recognise a duplicate. ``payload`` is the request body built for that stamp (the
    encoded record batch), kept so a retry sends the very same bytes; it goes with the stamp.
    """

    records: list[RecordInput]
    futures: list[asyncio.Future[RecordMetadata]]
    size: int
    created_ms: float
    stamp: BatchStamp | None = None
    attempts: int = 0
    payload: bytes | None = None

    def split(self) -> tuple[ProducerBatch, ProducerBatch]:
        """Two unstamped halves, in order (for a batch of at least two records); their sizes
        add up to this batch's."""
        if len(self.records) < 2:
            raise ValueError("a batch of one record cannot be split")
        half = len(self.records) // 2
        first = sum(record_size(r.key, r.value, r.headers) for r in self.records[:half])
        return (
            ProducerBatch(self.records[:half], self.futures[:half], first, self.created_ms),
            ProducerBatch(
                self.records[half:], self.futures[half:], self.size - first, self.created_ms
            ),
        )


class BatchQueue:
    """The batches of one partition, oldest first (see the module docstring)."""

    __slots__ = ("_batches", "_clock", "_max_bytes", "_max_records")

    def __init__(self, max_records: int, max_bytes: int, clock: Callable[[], float]) -> None:
        if max_records < 1 or max_bytes < 1:
            raise ValueError("a batch holds at least one record and one byte")
        self._max_records = max_records
        self._max_bytes = max_bytes
        self._clock = clock
        self._batches: deque[ProducerBatch] = deque()

    def __len__(self) -> int:
        """Records waiting, in every batch."""
        return sum(len(b.records) for b in self._batches)

    def __iter__(self) -> Iterator[ProducerBatch]:
        """The waiting batches, oldest first."""
        return iter(self._batches)

    @property
    def batches(self) -> int:
        return len(self._batches)

    def _full(self, batch: ProducerBatch) -> bool:
        return len(batch.records) >= self._max_records or batch.size >= self._max_bytes

    def append(
        self, record: RecordInput, future: asyncio.Future[RecordMetadata], size: int
    ) -> bool:
        """Add a record of ``size`` bytes to the open batch, or to a new one; True when a
        batch was started or became full (see the module docstring)."""
        batches = self._batches
        if batches:
            last = batches[-1]
            records = last.records
            if len(records) < self._max_records and last.size + size <= self._max_bytes:
                records.append(record)
                last.futures.append(future)
                last.size += size
                return len(records) >= self._max_records or last.size >= self._max_bytes
        batches.append(ProducerBatch([record], [future], size, self._clock()))
        return True

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

    def pop(self) -> ProducerBatch:
        """Take the head batch (``IndexError`` if there is none)."""
        return self._batches.popleft()

    def push_front(self, batches: Iterable[ProducerBatch]) -> None:
        """Put batches back at the head, in the given order, to be sent before the rest."""
        self._batches.extendleft(reversed(list(batches)))
