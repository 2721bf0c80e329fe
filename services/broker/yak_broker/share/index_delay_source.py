"""The ``DelaySource`` of a partition with a delay index: its replica's on-disk index.

The broker's delay indexer (``yak_broker.server.delay_indexer``) keeps one
``storage.delay_index.DelayIndex`` per replica of a topic with ``delayed.delivery.enable=true``
and hands each share-partition driver an ``IndexedDelaySource`` for its partition
(``DelayIndexer.delay_source``). The source holds no index itself: it asks its
``IndexedPartition`` for the index at each call, so a source outlives the index being reopened
(the log re-created, delays switched off and on) and answers "nothing" while there is none.

**Catching up before answering.** The index trails the log (it is built in the background).
A share-partition skips the delayed records it scans and then moves its delay watermark to
``now`` after ``due``: a record below the scan offset that the index has not reached yet would
be passed over for good. ``due`` therefore first has the partition index the log up to
``below_offset`` (``IndexedPartition.index_through``: a read of what the share-partition
already scanned, so normally nothing or little), and answers only for offsets the index covers.

**What the owner reads back.** ``watermark_ms`` is the ``after_ms`` of the last ``due`` call:
the share-partition's delay watermark. The indexer forgets buckets only below the lowest
watermark of the live sources of a partition (``DelayIndexer``), so an entry is never deleted
before the share-partitions on this broker took it.

Single event loop (the share driver's and the indexer's); not thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from yak_broker.share.state.records import DueEntry
from yak_broker.storage.delay_index import DelayIndex

__all__ = ["IndexedDelaySource", "IndexedPartition"]


class IndexedPartition(Protocol):
    """A replica's delay index as its owner lends it (``server.partition_delays``)."""

    def index_through(self, offset: int) -> DelayIndex | None:
        """The index, having indexed the log at least up to ``offset`` where it can (it
        may stop short: a truncation waits for a checkpoint); ``None``: no index now."""

    def covered_offset(self) -> int:
        """Every offset below it is indexed and still in the log."""

    def advance(self) -> None:
        """Bring the buckets due soon into memory (``DelayIndex.advance`` at the clock's now)."""


class IndexedDelaySource:
    """``DelaySource`` over the delay index of one partition (see the module doc)."""

    def __init__(self, partition: IndexedPartition) -> None:
        self._partition = partition
        #: The ``after_ms`` of the last ``due``: the share-partition's delay watermark.
        self.watermark_ms: int | None = None

    def due(self, after_ms: int, through_ms: int, below_offset: int) -> Iterable[DueEntry]:
        """Entries due in ``[after_ms, through_ms]`` of records below ``below_offset``."""
        self.watermark_ms = after_ms
        index = self._partition.index_through(below_offset)
        if index is None or through_ms < after_ms:
            return ()
        below = min(below_offset, self._partition.covered_offset())
        found = index.due(after_ms - 1, through_ms, below)
        return [
            DueEntry(offset, deliver_at)
            for deliver_at, offset in zip(found.deliver_at, found.offsets, strict=True)
        ]

    def next_due_ms(self, after_ms: int) -> int | None:
        """The earliest due time after ``after_ms``; past the index's horizon a lower bound
        (the bucket's start), exact once the timer fired and ``advance`` loaded it."""
        self._partition.advance()
        index = self._partition.index_through(0)
        return index.next_due_ms(after_ms) if index is not None else None
