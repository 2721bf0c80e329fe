"""Scheduled records at a partition's leader: the listing and the cancel.

Served on the broker's HTTP admin routes (``api.admin_routes``: ``GET/DELETE
/v1/scheduled/{topic}/{partition}[/{offset}]``), not on the internal plane: both are rare,
operator-driven calls with JSON answers, like DeleteRecords and ListOffsets already there, and
the rest-proxy forwards them to the partition's leader the way it forwards those.

- **Listing** (``list_scheduled``): the pending (not cancelled, not due yet unless the page
  starts earlier) schedules of the leader's delay index, in due order, of records below the
  high watermark (the only ones a consumer could see), paged by the last
  ``(deliver_at, offset)`` returned. The index is caught
  up to the high watermark first, so a record acknowledged before the call is listed.
- **Cancel** (``cancel_scheduled``): the record at ``offset`` must be below the high watermark
  and carry a ``yak-deliver-at`` header with a live entry in the index (else 404
  ``SCHEDULED_RECORD_NOT_FOUND``: not delayed, or cancelled already), and must not be due yet
  (409 ``RECORD_ALREADY_DUE``: share groups may hold it). The leader then appends the cancel
  control batch itself (``Log.append_control``: clients may not write control batches) and
  waits, like an acks=all produce, until the high watermark passes it: every in-sync replica
  has the cancel, and their indexes mark the entry when they reach it.

A topic without ``delayed.delivery.enable=true`` answers 400 ``DELAYS_NOT_ENABLED``.
Single event loop.
"""

from __future__ import annotations

from typing import NamedTuple

from yak.delays import cancel_batch, deliver_at_of
from yak.errors import (
    DelaysNotEnabledError,
    RecordAlreadyDueError,
    ScheduledRecordNotFoundError,
)
from yak.record.batch import decode_batch
from yak.topic_config import DELAYED_DELIVERY_ENABLE
from yak.types import TopicPartition
from yak_broker.replication.replica_manager import Replica, ReplicaManager
from yak_broker.server.delay_indexer import DelayIndexer
from yak_broker.server.partition_delays import PartitionDelays

__all__ = ["ScheduledRecord", "cancel_scheduled", "list_scheduled"]

#: Bytes read to find the record named by a cancel (the batch holding it comes whole).
_READ_BYTES = 64 * 1024
_LAST_OFFSET = 2**63 - 1


class ScheduledRecord(NamedTuple):
    offset: int
    deliver_at_ms: int


def _partition(delays: DelayIndexer, tp: TopicPartition) -> PartitionDelays:
    partition = delays.partition(tp)
    if partition is None:
        raise DelaysNotEnabledError(
            f"topic {tp.topic!r} does not allow delayed delivery ({DELAYED_DELIVERY_ENABLE} "
            "is not true): it has no scheduled records",
            topic=tp.topic,
        )
    return partition


def list_scheduled(
    replicas: ReplicaManager,
    delays: DelayIndexer,
    tp: TopicPartition,
    *,
    after_ms: int | None = None,
    after_offset: int = -1,
    limit: int = 100,
) -> list[ScheduledRecord]:
    """Up to ``limit`` pending schedules after ``(after_ms, after_offset)`` in due order
    (``after_ms`` None: those not due yet, i.e. after now)."""
    if after_ms is None:
        after_ms, after_offset = delays.now_ms(), _LAST_OFFSET
    replica, _state = replicas.leader(tp)
    partition = _partition(delays, tp)
    high_watermark = replica.log.high_watermark
    index = partition.index_through(high_watermark)
    if index is None:
        return []
    found = index.pending(after_ms, limit, after_offset)
    return [ScheduledRecord(offset, due) for due, offset in found if offset < high_watermark]


def _deliver_at(replica: Replica, offset: int) -> int:
    """The due time the record at ``offset`` carries; 404 when there is none."""
    log = replica.log
    if not log.log_start_offset <= offset < log.high_watermark:
        raise ScheduledRecordNotFoundError(
            f"offset {offset} is outside the readable records [{log.log_start_offset}, "
            f"{log.high_watermark}) of {replica.tp.dir_name}",
            offset=offset,
        )
    info = log.read(offset, _READ_BYTES)
    for record in decode_batch(info.records, 0, from_offset=offset).records:
        if record.offset == offset:
            due = deliver_at_of(record.headers)
            if due is not None:
                return due
            break
    raise ScheduledRecordNotFoundError(
        f"the record at offset {offset} of {replica.tp.dir_name} is not delayed", offset=offset
    )


async def cancel_scheduled(
    replicas: ReplicaManager,
    delays: DelayIndexer,
    tp: TopicPartition,
    offset: int,
    *,
    timeout_s: float = 30.0,
) -> ScheduledRecord:
    """Cancel the schedule of the record at ``offset`` (see the module doc)."""
    replica, _state = replicas.leader(tp)
    partition = _partition(delays, tp)
    due = _deliver_at(replica, offset)
    now = delays.now_ms()
    if due <= now:
        raise RecordAlreadyDueError(
            f"the record at offset {offset} was due at {due} ({now - due} ms ago): share "
            "groups may hold it already",
            offset=offset,
            deliver_at=due,
        )
    index = partition.index_through(replica.log.high_watermark)
    live = index is not None and offset in index.due(due - 1, due, offset + 1).offsets
    if not live:
        raise ScheduledRecordNotFoundError(
            f"the record at offset {offset} has no pending schedule (cancelled already)",
            offset=offset,
        )
    _replica, leader = replicas.leader_partition(tp)
    log = replica.log
    info = log.append_control(cancel_batch(offset, due, now), leader.leader_epoch)
    end = info.last_offset + 1
    if log.config.sync:
        log.flush()
        replicas.on_leader_append(replica, log.log_end_offset)
    else:
        replicas.on_leader_append(replica)
    if log.high_watermark < end:
        await replicas.hw_waiters.wait(tp, end, timeout_s, f"{tp.dir_name} cancel @{end - 1}")
    return ScheduledRecord(offset, due)
