"""The value types of a share-partition: record states, acknowledgement types, settings, and what
goes in and out of ``SharePartition`` (``share_partition.py``) and its snapshot codec.

State and acknowledgement numbers are Kafka's (``RecordState``, ``AcknowledgeType`` of
KIP-932, ``RENEW`` from KIP-1222), so they can travel unchanged in Kafka-framed messages.
Everything here is an immutable value; nothing does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

__all__ = [
    "MAX_OFFSET",
    "AcknowledgeType",
    "AcknowledgementBatch",
    "AcquiredRecord",
    "DeadLetter",
    "DeadLetterReason",
    "DelayWatermark",
    "DueEntry",
    "LogRange",
    "LogRecord",
    "ReadRequest",
    "RecordState",
    "RecordView",
    "Run",
    "ShareSettings",
    "ShareSnapshot",
    "ShareStats",
]

#: The largest offset: a delay watermark at ``(ms, MAX_OFFSET)`` covers every entry due at ms.
MAX_OFFSET = (1 << 63) - 1


class RecordState(IntEnum):
    """The state of one in-flight record (Kafka's ids)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """What a member says of records it holds (Kafka's ids)."""

    ACCEPT = 1  # done
    RELEASE = 2  # offer again now; the delivery count stays
    REJECT = 3  # never again: archived and dead-lettered
    RENEW = 4  # extend the lock to now + the lock duration


class DeadLetterReason(IntEnum):
    """Why an archived record is owed to the dead-letter topic (NONE: owed nothing)."""

    NONE = 0
    REJECTED = 1
    MAX_DELIVERY_ATTEMPTS = 2

    @property
    def text(self) -> str:
        """The reason as the dead-letter record's header says it."""
        return _REASON_TEXT[self]


_REASON_TEXT = {
    DeadLetterReason.NONE: "",
    DeadLetterReason.REJECTED: "rejected",
    DeadLetterReason.MAX_DELIVERY_ATTEMPTS: "max delivery attempts",
}


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """A share group's settings for its share-partitions (Kafka's names in the comments)."""

    #: ``group.share.record.lock.duration.ms``
    lock_duration_ms: int = 30_000
    #: ``group.share.delivery.count.limit``: a record acquired this often is not offered again.
    max_delivery_attempts: int = 5
    #: ``group.share.partition.max.record.locks``: records held in the window at most.
    max_in_flight: int = 2_000

    def __post_init__(self) -> None:
        if self.lock_duration_ms <= 0:
            raise ValueError(f"lock duration must be positive, not {self.lock_duration_ms}")
        if not 1 <= self.max_delivery_attempts <= 255:
            raise ValueError(f"max delivery attempts must be 1-255: {self.max_delivery_attempts}")
        if self.max_in_flight <= 0:
            raise ValueError(f"max in flight must be positive, not {self.max_in_flight}")


class LogRecord(NamedTuple):
    """A record the driver read from the log at ``scan_offset``, for ``admit``."""

    offset: int
    timestamp_ms: int
    #: Its ``yak-deliver-at`` header (epoch ms), or None for a record due at once.
    deliver_at_ms: int | None = None
    #: Whether the acquiring request's filter accepted it (a rejected one is done at once).
    accepted: bool = True


class LogRange(NamedTuple):
    """Consecutive records ``first_offset..last_offset`` (inclusive) read from the log, for
    ``admit``: due at once, accepted, all with ``timestamp_ms`` — a gapless batch the driver
    took from its header, admitted without one object per record."""

    first_offset: int
    last_offset: int
    timestamp_ms: int


class DueEntry(NamedTuple):
    """One entry of the partition's delay index: a delayed record and when it is due."""

    offset: int
    deliver_at_ms: int


class DelayWatermark(NamedTuple):
    """Every delay-index entry at or before ``(deliver_at_ms, offset)`` in (time, offset) order
    has entered the window or will through ``admit``: ``offset`` is ``MAX_OFFSET`` once every
    entry due at ``deliver_at_ms`` is in; below it only when a full window stopped the intake."""

    deliver_at_ms: int
    offset: int = MAX_OFFSET


class ReadRequest(NamedTuple):
    """The machine asks the driver for log: read from ``offset``, at most ``max_records``."""

    offset: int
    max_records: int


class AcquiredRecord(NamedTuple):
    """A record handed to a member, with its delivery count (1 on the first delivery)."""

    offset: int
    delivery_count: int


class AcknowledgementBatch(NamedTuple):
    """An inclusive offset range and what the member says of the records in it."""

    first_offset: int
    last_offset: int
    type: AcknowledgeType


class DeadLetter(NamedTuple):
    """A record the driver must copy to the group's dead-letter topic."""

    offset: int
    delivery_count: int
    reason: DeadLetterReason
    timestamp_ms: int


class RecordView(NamedTuple):
    """One record of the window as the console (and the tests) see it."""

    offset: int
    state: RecordState
    delivery_count: int
    member_id: str | None
    deadline_ms: int
    reason: DeadLetterReason
    timestamp_ms: int


class ShareStats(NamedTuple):
    """Counts over the window, for metrics and the console."""

    available: int
    acquired: int
    acknowledged: int
    archived: int
    dead_letter_pending: int
    in_flight: int
    #: The oldest timestamp among available and acquired records (None: nothing unacked).
    oldest_unacked_timestamp_ms: int | None
    acquired_by_member: dict[str, int]


class Run(NamedTuple):
    """Consecutive offsets of the window that share every attribute (a snapshot's unit).

    ``member_id`` and ``deadline_ms`` are set for ``ACQUIRED`` only (else None and 0);
    ``reason`` is not NONE for ``ARCHIVED`` only; ``timestamp_ms`` is the run's oldest.
    """

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int
    member_id: str | None
    deadline_ms: int
    reason: DeadLetterReason
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    """The whole durable state of one share-partition (see ``snapshot.py`` for its bytes)."""

    leader_epoch: int
    #: Where the share-partition began: delayed records below it are not its business.
    origin_offset: int
    start_offset: int
    scan_offset: int
    delay_watermark: DelayWatermark
    #: In offset order, never overlapping; a gap between runs is an offset that is complete.
    runs: tuple[Run, ...]
