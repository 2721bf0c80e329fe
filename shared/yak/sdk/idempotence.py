"""``SequenceNumbers``: the idempotent producer's session and per-partition sequence numbers.

Kafka's idempotence, client side, as a pure state machine. A session is the producer id and
epoch handed out by ``POST /api/v1/producers``. Within a session each partition numbers its
records 0, 1, 2 ... (wrapping after 2**31 - 1, as Kafka does); a batch is *stamped* once with
(producer id, epoch, base sequence) before its first send and keeps that stamp through every
retry, so a resend of a batch the broker already wrote returns its first offsets instead of a
copy.

Invariants:

* at most one batch per partition is in flight (stamped, not yet acknowledged or released), so
  a partition's next base sequence is always the end of the last acknowledged batch;
* ``acknowledge`` (written) moves the partition's sequence past the batch; ``release`` (known
  *not* written: a validation error, a split) leaves it, so the next batch reuses the numbers;
* a batch whose fate is unknown (out of retries or time) ends the session (``end_session``):
  its numbers can be neither reused nor skipped safely, so the next batch of every partition
  starts a fresh session at sequence 0. Batches still in flight in the old session finish
  under their own stamps.

Not thread-safe: one event loop owns an instance.
"""

from __future__ import annotations

from typing import NamedTuple

from yak.types import TopicPartition

__all__ = ["SEQUENCE_LIMIT", "BatchStamp", "SequenceNumbers"]

#: Sequence numbers are int32; after the largest one comes 0 again.
SEQUENCE_LIMIT = 2**31


class BatchStamp(NamedTuple):
    """The idempotent identity of one batch."""

    producer_id: int
    producer_epoch: int
    base_sequence: int


class SequenceNumbers:
    """See the module docstring."""

    def __init__(self) -> None:
        self._session: tuple[int, int] | None = None
        self._next: dict[TopicPartition, int] = {}
        self._in_flight: set[TopicPartition] = set()

    @property
    def session(self) -> tuple[int, int] | None:
        """The current (producer id, epoch), or None until one is started."""
        return self._session

    def start_session(self, producer_id: int, producer_epoch: int) -> None:
        """Use a new producer identity; every partition starts again at sequence 0."""
        self._session = (producer_id, producer_epoch)
        self._next.clear()

    def end_session(self, stamp: BatchStamp) -> None:
        """Give up the session ``stamp`` belongs to (no-op if another one started since)."""
        if self._session == (stamp.producer_id, stamp.producer_epoch):
            self._session = None
            self._next.clear()

    def next_sequence(self, tp: TopicPartition) -> int:
        return self._next.get(tp, 0)

    def in_flight(self, tp: TopicPartition) -> bool:
        return tp in self._in_flight

    def stamp(self, tp: TopicPartition) -> BatchStamp:
        """The stamp of the partition's next batch, which is now in flight."""
        if self._session is None:
            raise RuntimeError("no producer session: start one first")
        if tp in self._in_flight:
            raise RuntimeError(f"{tp} already has a batch in flight")
        self._in_flight.add(tp)
        producer_id, epoch = self._session
        return BatchStamp(producer_id, epoch, self._next.get(tp, 0))

    def acknowledge(self, tp: TopicPartition, stamp: BatchStamp, count: int) -> None:
        """The batch of ``count`` records stamped ``stamp`` was written."""
        self._in_flight.discard(tp)
        if self._session == (stamp.producer_id, stamp.producer_epoch):
            self._next[tp] = (stamp.base_sequence + count) % SEQUENCE_LIMIT

    def release(self, tp: TopicPartition) -> None:
        """The in-flight batch was not written; its sequence numbers go to the next batch."""
        self._in_flight.discard(tp)
