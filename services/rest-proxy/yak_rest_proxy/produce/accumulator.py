"""The records the producer holds, per partition (Kafka's ``RecordAccumulator``), from the
moment a ``send`` queues them until their batch is answered, and where each one landed.

A queue per (topic, partition, acks) (``PartitionQueue``) holds *chunks* (``Chunk``): the
consecutive records of one ``send``, already encoded — one object per call and partition, never
per record — oldest first, and at most one batch in flight (``InFlight``), so batches of one
partition are never reordered. It numbers its records with consecutive sequence numbers under
its own producer id (idempotence; ``producer`` says when they are renewed). ``take`` makes the
next batch from the oldest chunks that fit, splitting the first one that does not fit whole,
and ``encode`` its bytes; ``batch_limit`` is the most a topic's batch may hold (the smaller
of ``max.message.bytes`` and ``segment.bytes``). Each ``send`` has one ``Call``, whose future
resolves once every chunk of it was settled (``InFlight.land``, ``Chunk.fail``), with one
``Result`` per record: ``ProducedRecord`` or a ``YakError``. Single event loop.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import repeat
from typing import NamedTuple, cast

from yak.errors import YakError
from yak.record import CompressionType, RecordInput
from yak.record.batch import encode_batch_of
from yak.record.record_encoder import encode_bodies
from yak.topic_config import CATALOGUE

__all__ = [
    "Call",
    "Chunk",
    "InFlight",
    "PartitionQueue",
    "ProducedRecord",
    "Result",
    "batch_limit",
    "encode",
    "record_size",
    "take",
]

_RECORD_OVERHEAD = 24  # varint lengths, attributes, deltas: an upper bound per record
_NEW_TUPLE = tuple.__new__


class ProducedRecord(NamedTuple):
    """Where a record landed: its partition, offset (-1 with acks=0) and timestamp."""

    partition: int
    offset: int
    timestamp: int


#: Where one record landed, or why it did not.
Result = ProducedRecord | YakError


def record_size(record: RecordInput) -> int:
    """An upper bound of the record's bytes inside a batch."""
    size = _RECORD_OVERHEAD + len(record.key or b"") + len(record.value or b"")
    for key, value in record.headers:
        size += len(key) + len(value or b"") + 10
    return size


def batch_limit(configs: Mapping[str, str]) -> int:
    """The largest batch a topic takes, from its config overrides: ``max.message.bytes``, and
    no more than ``segment.bytes``, since the broker refuses a request larger than a segment."""
    limits = []
    for name in ("max.message.bytes", "segment.bytes"):
        value = configs.get(name)
        limits.append(int(CATALOGUE[name].default if value is None else value))
    return min(limits)


class Call:
    """The records of one ``send``: their results fill in, a chunk at a time, as their batches
    are answered, and ``future`` resolves once all are in (one future per call)."""

    __slots__ = ("enqueued", "future", "remaining", "results")

    def __init__(self, future: asyncio.Future[list[Result]], count: int, enqueued: float) -> None:
        self.future = future
        self.results: list[Result | None] = [None] * count
        self.remaining = count
        self.enqueued = enqueued  # time.perf_counter() when its records were queued

    def settle(self, start: int, results: list[Result]) -> None:
        """The results of the call's records ``start``, ``start + 1`` ... (one chunk's)."""
        mine = self.results
        if mine[start] is None:  # a chunk is settled once; the guard keeps it so
            end = start + len(results)
            mine[start:end] = results
            self.remaining -= len(results)
            if not self.remaining and not self.future.done():
                self.future.set_result(mine)  # type: ignore[arg-type]  # all filled in


class Chunk:
    """Consecutive records of one call, as they wait in a queue or fly in a batch: their
    bodies (``encode_record_body``: key, value, headers), timestamps and ``record_size``-s;
    ``start`` is the first one's place in its call. One object per call and partition, not
    per record; a batch that takes only part of a chunk splits it (``split``)."""

    __slots__ = ("bodies", "call", "size", "sizes", "start", "timestamps")

    def __init__(
        self,
        call: Call,
        start: int,
        bodies: list[bytes],
        timestamps: list[int],
        sizes: list[int],
        size: int,
    ) -> None:
        self.call = call
        self.start = start
        self.bodies = bodies
        self.timestamps = timestamps
        self.sizes = sizes
        self.size = size  # sum(sizes)

    def split(self, count: int) -> Chunk:
        """The first ``count`` records as a chunk of their own; this one keeps the rest."""
        head = Chunk(
            self.call,
            self.start,
            self.bodies[:count],
            self.timestamps[:count],
            self.sizes[:count],
            sum(self.sizes[:count]),
        )
        self.start += count
        self.bodies = self.bodies[count:]
        self.timestamps = self.timestamps[count:]
        self.sizes = self.sizes[count:]
        self.size -= head.size
        return head

    def fail(self, error: YakError) -> None:
        self.call.settle(self.start, [error] * len(self.bodies))


@dataclass(slots=True)
class InFlight:
    """A queue's batch under way: its chunks, their record count, the encoded batch, its first
    sequence number and when it was first sent (``Clock.monotonic``)."""

    chunks: list[Chunk]
    count: int  # records
    batch: bytes
    base_sequence: int
    first_sent: float

    def land(self, partition: int, base_offset: int) -> None:
        """Settle the batch's records as landed at consecutive offsets from ``base_offset``
        (-1 each with acks=0)."""
        offset = base_offset
        partitions = repeat(partition)
        for chunk in self.chunks:
            count = len(chunk.bodies)
            offsets = range(offset, offset + count) if offset >= 0 else repeat(-1)
            # ProducedRecord-s made in C: tuple.__new__ skips the NamedTuple's Python __new__.
            results = list(
                map(
                    _NEW_TUPLE,
                    repeat(ProducedRecord),
                    zip(partitions, offsets, chunk.timestamps, strict=False),
                )
            )
            chunk.call.settle(chunk.start, cast(list[Result], results))
            if offset >= 0:
                offset += count


@dataclass(eq=False, slots=True)
class PartitionQueue:
    topic: str
    partition: int
    acks: int
    pending: deque[Chunk] = field(default_factory=deque)
    pending_bytes: int = 0
    in_flight: InFlight | None = None
    timer: asyncio.TimerHandle | None = None
    #: The broker whose busy sender this queue waits on (its linger), by id: the sender owns
    #: the list of queues lingering on it, the queue knows only where it waits.
    lingering_on: int | None = None
    routing: bool = False
    producer_id: int = -1
    next_sequence: int = 0


def take(queue: PartitionQueue, limit: int) -> list[Chunk]:
    """The records of the next batch, oldest first: whole chunks while they fit in
    ``limit`` bytes (with the batch header), then the part of the next that fits; always at
    least one record. A cancelled request's records are dropped, not sent."""
    pending = queue.pending
    chunks: list[Chunk] = []
    size = 61
    while pending:
        chunk = pending[0]
        if chunk.call.future.done():
            pending.popleft()
            queue.pending_bytes -= chunk.size
            continue
        if size + chunk.size > limit:
            fit = 0
            for record_bytes in chunk.sizes:
                if size + record_bytes > limit and (fit or chunks):
                    break
                size += record_bytes
                fit += 1
            if fit:
                head = chunk.split(fit)
                queue.pending_bytes -= head.size
                chunks.append(head)
            break
        pending.popleft()
        queue.pending_bytes -= chunk.size
        size += chunk.size
        chunks.append(chunk)
    return chunks


def encode(
    queue: PartitionQueue, chunks: list[Chunk], base_sequence: int, compression: CompressionType
) -> bytes:
    """The batch of ``chunks`` under the queue's producer id, from ``base_sequence``."""
    if len(chunks) == 1:
        bodies, timestamps = chunks[0].bodies, chunks[0].timestamps
    else:
        bodies = [body for chunk in chunks for body in chunk.bodies]
        timestamps = [stamp for chunk in chunks for stamp in chunk.timestamps]
    return encode_batch_of(
        encode_bodies(bodies, timestamps),
        compression=compression,
        producer_id=queue.producer_id,
        producer_epoch=0,
        base_sequence=base_sequence,
    )
