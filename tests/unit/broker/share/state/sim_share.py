"""A simulated share-partition for ``test_share_simulation``: a log that grows (gaps, delayed
records, records a filter rejects), a driver that reads it, injects due delays, persists a
snapshot after every change and copies dead letters, members that acquire and acknowledge, and
a model of what each was told. ``Model`` holds the truth the invariants are checked against.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from yak_broker.share.state.records import (
    AcknowledgementBatch,
    AcknowledgeType,
    DelayWatermark,
    DueEntry,
    LogRecord,
    ShareSettings,
)
from yak_broker.share.state.share_partition import SharePartition
from yak_broker.share.state.snapshot import decode_snapshot, encode_snapshot

__all__ = ["Lock", "Model", "SimLog", "restore"]


@dataclass(slots=True)
class SimLog:
    """The partition's log: offset -> record; offsets missing below ``end`` are gaps."""

    records: dict[int, LogRecord] = field(default_factory=dict)
    end: int = 0

    def produce(self, rng: random.Random, now_ms: int) -> None:
        for _ in range(rng.randint(1, 5)):
            if rng.random() < 0.1:
                self.end += 1  # compacted away, or a control batch
            delayed = rng.random() < 0.2
            deliver_at = now_ms + rng.randint(-200, 3_000) if delayed else None
            accepted = delayed or rng.random() < 0.85
            self.records[self.end] = LogRecord(self.end, now_ms, deliver_at, accepted)
            self.end += 1

    def read(self, offset: int, max_records: int) -> tuple[list[LogRecord], int]:
        """Up to ``max_records`` records from ``offset``, and where the read ended."""
        out = [self.records[o] for o in range(offset, self.end) if o in self.records]
        if len(out) > max_records:
            return out[:max_records], out[max_records].offset
        return out, self.end

    def due(self, now_ms: int) -> list[DueEntry]:
        """The delay index: every delayed record due by ``now_ms``."""
        return [
            DueEntry(r.offset, r.deliver_at_ms)
            for r in self.records.values()
            if r.deliver_at_ms is not None and r.deliver_at_ms <= now_ms
        ]

    @property
    def latest_due_ms(self) -> int:
        return max((r.deliver_at_ms or 0 for r in self.records.values()), default=0)


class Lock:
    """Who the model says holds a record, until when."""

    __slots__ = ("deadline_ms", "member")

    def __init__(self, member: str, deadline_ms: int) -> None:
        self.member = member
        self.deadline_ms = deadline_ms


@dataclass(slots=True)
class Model:
    """What the driver and the members were told: the truth for the invariants."""

    settings: ShareSettings
    now_ms: int = 0
    locks: dict[int, Lock] = field(default_factory=dict)
    #: What each member believes it holds (answers lost on the way are missing here).
    held: dict[str, set[int]] = field(default_factory=dict)
    deliveries: dict[int, int] = field(default_factory=dict)
    accepted: set[int] = field(default_factory=set)
    dead_letters: list[int] = field(default_factory=list)
    dead_lettered: set[int] = field(default_factory=set)

    def holds(self, member: str, offset: int) -> bool:
        lock = self.locks.get(offset)
        return lock is not None and lock.member == member and lock.deadline_ms > self.now_ms

    def expected(self, member: str, first: int, last: int, m: SharePartition) -> bool:
        """Whether the machine must apply this batch: every in-flight record in range is the
        member's, under a live lock, and there is one."""
        in_flight = [o for o in range(first, last + 1) if m.record(o) is not None]
        return bool(in_flight) and all(self.holds(member, o) for o in in_flight)

    def applied(self, member: str, batch: AcknowledgementBatch) -> None:
        for offset in range(batch.first_offset, batch.last_offset + 1):
            lock = self.locks.get(offset)
            if lock is None or not self.holds(member, offset):
                continue  # a stale lock of a record that left the window
            if batch.type == AcknowledgeType.RENEW:
                lock.deadline_ms = self.now_ms + self.settings.lock_duration_ms
                continue
            del self.locks[offset]
            self.held.get(member, set()).discard(offset)
            if batch.type == AcknowledgeType.ACCEPT:
                self.accepted.add(offset)


def restore(m: SharePartition, data: bytes, leader_epoch: int) -> SharePartition:
    """The machine a new leader builds from the persisted bytes."""
    return SharePartition.restore(decode_snapshot(data), m.settings, leader_epoch=leader_epoch)


def persisted(m: SharePartition) -> bytes:
    return encode_snapshot(m.snapshot())


def fresh(settings: ShareSettings) -> SharePartition:
    return SharePartition(settings, start_offset=0, delay_watermark=DelayWatermark(0))
