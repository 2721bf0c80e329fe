"""Append a produce request's batches to the partitions this broker leads (Kafka's
``ReplicaManager.appendRecords``).

Each partition is appended on its own: the log validates all of that partition's batches
(framing, CRC-32C, ``max.message.bytes``, producer sequence) before writing any byte, and a
failure is reported for that partition only — the other partitions are still appended. Appends
of several partitions run concurrently, so in ``flush.mode=sync`` their fsyncs overlap.

acks:

- ``1``: answer once the leader appended (in ``flush.mode=sync``, once an fsync covers it);
- ``-1`` (all): refused before any write with ``NOT_ENOUGH_REPLICAS`` when the ISR is smaller
  than ``min.insync.replicas``; otherwise answered once the high watermark passes the batches,
  i.e. every ISR member has them (with an ISR of one, at once: exactly acks=1, as in Kafka);
- ``0``: appended the same way but nobody waits; the caller ignores the results.

Consumers see batches once the high watermark passes them: at once with an ISR of one, else
when the followers have fetched them (``LeaderPartition``). In ``flush.mode=sync`` the leader's
own share counts only after its fsync.

``timeout_ms`` bounds the wait (fsync, replication); on expiry the partition reports
``REQUEST_TIMED_OUT`` — its batches are in the leader's log and may still be committed, as in
Kafka. If the broker loses leadership meanwhile the wait ends with
``NOT_LEADER_OR_FOLLOWER``: the producer retries, its idempotence dedupes.
Nothing in the append path awaits before the log write, so partitions see appends in arrival
order.
A write that fails because the data folder failed (``ENOSPC``, ``EIO``: the log cut its bytes
off again) answers ``KAFKA_STORAGE_ERROR`` (retriable) and takes the folder offline
(``storage.log_dir_failure``); while it is offline appends are refused the same way before
touching the disk, until the controller has moved the leadership and the client follows it.
Timestamps are the producer's (CreateTime): ``log_append_time`` is always -1.
Each appended partition adds its bytes and records to the topic's bytes-in and records-in
counters (``metrics.BrokerTopicStats``); a retried batch the log recognised as a duplicate
does not. Once per request, whatever the transport, ``append`` (the log appends, summed) and,
with acks=all, ``replication`` (from the last append to the answer) are observed in
``yak_broker_produce_stage_seconds``.
"""

from __future__ import annotations

import asyncio
import time

from yak.errors import KafkaTimeoutError, YakError
from yak.protocol.broker_wire import (
    ACKS_ALL,
    PartitionError,
    ProducePartition,
    ProduceRequest,
    ProduceResult,
)
from yak.types import TopicPartition
from yak_broker.replication.replica_manager import Replica, ReplicaManager

__all__ = ["append_partitions"]


class _Timing:
    """One request's appends: their summed time and when the last one ended."""

    __slots__ = ("appended_at", "seconds")

    def __init__(self) -> None:
        self.seconds = 0.0
        self.appended_at = 0.0


async def append_partitions(
    request: ProduceRequest, replicas: ReplicaManager
) -> list[ProduceResult]:
    """Append every partition of ``request``; one result per partition, in request order."""
    timeout_s = request.timeout_ms / 1000
    timing = _Timing()
    if len(request.partitions) == 1:
        results = [await _append(request.partitions[0], request.acks, timeout_s, replicas, timing)]
    else:
        appends = [
            _append(p, request.acks, timeout_s, replicas, timing) for p in request.partitions
        ]
        results = list(await asyncio.gather(*appends))
    if timing.appended_at:  # something was appended
        stats = replicas.stats
        stats.produce_append.observe(timing.seconds)
        if request.acks == ACKS_ALL:
            stats.produce_replication.observe(time.perf_counter() - timing.appended_at)
    return results


async def _append(
    wanted: ProducePartition,
    acks: int,
    timeout_s: float,
    replicas: ReplicaManager,
    timing: _Timing,
) -> ProduceResult:
    tp = TopicPartition(wanted.topic, wanted.partition)
    try:
        replica, leader = replicas.leader_partition(tp)
        if acks == ACKS_ALL:
            leader.check_acks_all(replica.min_insync_replicas)
        failures = replicas.log_dir_failures
        if failures.offline:
            failures.check_online(tp.dir_name)
        log = replica.log
        started = time.perf_counter()
        info = log.append(wanted.records, leader.leader_epoch)  # validates all, then writes
        timing.appended_at = time.perf_counter()
        timing.seconds += timing.appended_at - started
        if not info.duplicate:
            replicas.stats.on_produce(tp.topic, len(memoryview(wanted.records)), info.record_count)
        end = info.last_offset + 1
        if not log.config.sync:
            replicas.on_leader_append(replica)
            if acks == ACKS_ALL and log.high_watermark < end:
                await replicas.hw_waiters.wait(tp, end, timeout_s, f"{tp.dir_name} @{end - 1}")
        else:
            durable = asyncio.ensure_future(_durable_then_visible(replica, end, replicas))
            durable.add_done_callback(_retrieve)
            if acks != 0:
                await _wait(durable, replica, timeout_s)
            if acks == ACKS_ALL and log.high_watermark < end:
                await replicas.hw_waiters.wait(tp, end, timeout_s, f"{tp.dir_name} @{end - 1}")
    except YakError as exc:
        return ProduceResult(tp.topic, tp.partition, error=PartitionError.of(exc))
    except OSError as exc:  # the folder failed (a full disk, EIO): see ``log_dir_failure``
        error = replicas.log_dir_failures.fail(exc, tp.dir_name)
        return ProduceResult(tp.topic, tp.partition, error=PartitionError.of(error))
    return ProduceResult(tp.topic, tp.partition, info.first_offset, -1, info.log_start_offset)


async def _durable_then_visible(replica: Replica, end: int, replicas: ReplicaManager) -> None:
    """flush.mode=sync: the leader's share of the high watermark counts once fsynced."""
    await replica.committer.wait_durable(end)
    replicas.on_leader_append(replica, end)


async def _wait(durable: asyncio.Future[None], replica: Replica, timeout_s: float) -> None:
    try:
        await asyncio.wait_for(asyncio.shield(durable), timeout_s)
    except TimeoutError:
        raise KafkaTimeoutError(
            f"appended to {replica.tp.dir_name} but no fsync within {timeout_s:.3f} s",
            topic=replica.tp.topic,
            partition=replica.tp.partition,
        ) from None


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()  # a failed fsync is reported to the waiting producer, if any
