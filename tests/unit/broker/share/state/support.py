"""Helpers for the share-partition tests: a small machine, log records, compact state views."""

from __future__ import annotations

from collections.abc import Iterable

from yak_broker.share.state.records import (
    AcknowledgementBatch,
    AcknowledgeType,
    LogRecord,
    RecordState,
    ShareSettings,
)
from yak_broker.share.state.share_partition import SharePartition
from yak_broker.share.state.snapshot import decode_snapshot, encode_snapshot

LOCK = 1_000
SETTINGS = ShareSettings(lock_duration_ms=LOCK, max_delivery_attempts=3, max_in_flight=10)

ACCEPT = AcknowledgeType.ACCEPT
RELEASE = AcknowledgeType.RELEASE
REJECT = AcknowledgeType.REJECT
RENEW = AcknowledgeType.RENEW


def machine(start: int = 0, settings: ShareSettings = SETTINGS) -> SharePartition:
    return SharePartition(settings, start_offset=start)


def records(offsets: Iterable[int], *, ts: int = 100) -> list[LogRecord]:
    """Plain records (no delay, accepted by the filter), timestamp ``ts + offset``."""
    return [LogRecord(offset, ts + offset) for offset in offsets]


def filled(
    offsets: Iterable[int], start: int = 0, next_offset: int | None = None
) -> SharePartition:
    """A machine that read ``offsets`` from the log (to ``next_offset``, default last + 1)."""
    m = machine(start)
    batch = records(offsets)
    m.admit(batch, next_offset if next_offset is not None else batch[-1].offset + 1)
    return m


def batch(first: int, last: int, kind: AcknowledgeType) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, kind)


def states(m: SharePartition) -> dict[int, tuple[str, int, str | None]]:
    """Every in-flight record as (state, delivery count, member)."""
    return {r.offset: (r.state.name, r.delivery_count, r.member_id) for r in m.records()}


def held(m: SharePartition, member: str) -> list[int]:
    """The offsets ``member`` holds."""
    return [
        r.offset for r in m.records() if r.state is RecordState.ACQUIRED and r.member_id == member
    ]


def round_trip(m: SharePartition, *, leader_epoch: int | None = None) -> SharePartition:
    """The machine a new leader restores from ``m``'s encoded snapshot."""
    epoch = m.leader_epoch if leader_epoch is None else leader_epoch
    snapshot = decode_snapshot(encode_snapshot(m.snapshot()))
    return SharePartition.restore(snapshot, m.settings, leader_epoch=epoch)
