"""Where a share-partition learns which delayed records came due: the ``DelaySource`` protocol.

A topic with ``delayed.delivery.enable=true`` keeps a delay index on every replica
(``storage.delay_index``; docs/decisions.md, "Delayed and scheduled delivery"). The share driver
never reads it directly: it asks a ``DelaySource`` for the partition, which the broker hands it
(``DelaySourceFactory``, called once per share-partition driver). ``NullDelaySource`` is the
source of a partition without an index: nothing is ever due.

Contract of a source (the driver calls it on the event loop, between awaits; it must not
block on I/O for long — the index keeps what is due soon in memory):

- ``due(after_ms, through_ms, below_offset)``: every entry due in ``[after_ms, through_ms]``
  (inclusive both ends: a watermark short of its time leaves entries at ``after_ms`` owed) with
  an offset below ``below_offset``, in any order; cancelled entries are left out. Entries the
  machine already took may come again: ``SharePartition.inject_due`` passes over them.
- ``next_due_ms(after_ms)``: the earliest due time of an entry due after ``after_ms`` (None:
  nothing pending), for the driver's single timer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from yak_broker.share.state.records import DueEntry

__all__ = ["NULL_DELAY_SOURCE", "DelaySource", "DelaySourceFactory", "NullDelaySource"]


class DelaySource(Protocol):
    """The due entries of one partition's delay index (see the module doc)."""

    def due(self, after_ms: int, through_ms: int, below_offset: int) -> Iterable[DueEntry]: ...

    def next_due_ms(self, after_ms: int) -> int | None: ...


class NullDelaySource:
    """A partition without a delay index: nothing is ever due."""

    def due(self, after_ms: int, through_ms: int, below_offset: int) -> Iterable[DueEntry]:
        return ()

    def next_due_ms(self, after_ms: int) -> int | None:
        return None


NULL_DELAY_SOURCE = NullDelaySource()

#: The broker's hook: the delay source of ``(topic, partition)`` on this broker, None for a
#: topic without ``delayed.delivery.enable=true`` (its records' headers are not read).
DelaySourceFactory = Callable[[str, int], DelaySource | None]
