"""Append a produce request's batches to the partitions this broker leads (Kafka's
``ReplicaManager.appendRecords``).

Each partition is appended on its own: the log validates all of that partition's batches
(framing, CRC-32C, ``max.message.bytes``, producer sequence) before writing any byte, and a
failure is reported for that partition only — the other partitions are still appended. Appends
of several partitions run concurrently, so in ``flush.mode=sync`` their fsyncs overlap.

acks:

- ``1``: answer once the leader appended (in ``flush.mode=sync``, once an fsync covers it);
  consumers see the batches at the same moment (``advance_high_watermark``);
- ``-1`` (all): accepted when the ISR is this broker alone — then it means exactly acks=1, as in
  Kafka — and refused with ``NOT_ENOUGH_REPLICAS`` when the ISR is smaller than
  ``min.insync.replicas``. With followers in the ISR it is refused with ``INVALID_REQUEST``
  until replication exists (a later issue): waiting for followers that never fetch would only
  time out;
- ``0``: appended the same way but nobody waits for an fsync; the caller ignores the results.

``timeout_ms`` bounds the wait for the fsync (sync mode); on expiry the partition reports
``REQUEST_TIMED_OUT`` — its batches are appended and become visible once fsynced, as in Kafka.
Nothing in the append path awaits before the log write, so partitions see appends in arrival
order.
Timestamps are the producer's (CreateTime): ``log_append_time`` is always -1.
"""

from __future__ import annotations

import asyncio

from yak.errors import (
    InvalidRequestError,
    KafkaTimeoutError,
    NotEnoughReplicasError,
    UnknownServerError,
    YakError,
)
from yak.metadata.models import PartitionState
from yak.protocol.broker_wire import (
    ACKS_ALL,
    PartitionError,
    ProducePartition,
    ProduceRequest,
    ProduceResult,
)
from yak_broker.replica_manager import Replica, ReplicaManager
from yak_broker.storage.log_manager import TopicPartition

__all__ = ["append_partitions"]


async def append_partitions(
    request: ProduceRequest, replicas: ReplicaManager
) -> list[ProduceResult]:
    """Append every partition of ``request``; one result per partition, in request order."""
    timeout_s = request.timeout_ms / 1000
    if len(request.partitions) == 1:
        return [await _append(request.partitions[0], request.acks, timeout_s, replicas)]
    appends = [_append(p, request.acks, timeout_s, replicas) for p in request.partitions]
    return list(await asyncio.gather(*appends))


async def _append(
    wanted: ProducePartition, acks: int, timeout_s: float, replicas: ReplicaManager
) -> ProduceResult:
    tp = TopicPartition(wanted.topic, wanted.partition)
    try:
        replica, state = replicas.leader(tp)
        if acks == ACKS_ALL:
            _check_acks_all(state, replica.min_insync_replicas, replicas.broker_id)
        log = replica.log
        info = log.append(wanted.records, state.leader_epoch)  # validates all, then writes
        end = info.last_offset + 1
        if not log.config.sync:
            replicas.advance_high_watermark(replica, end)
        else:
            durable = asyncio.ensure_future(_durable_then_visible(replica, end, replicas))
            durable.add_done_callback(_retrieve)
            if acks != 0:
                await _wait(durable, replica, timeout_s)
    except YakError as exc:
        return ProduceResult(tp.topic, tp.partition, error=PartitionError.of(exc))
    except OSError as exc:
        error = UnknownServerError(f"storage error on {tp.dir_name}: {exc}")
        return ProduceResult(tp.topic, tp.partition, error=PartitionError.of(error))
    return ProduceResult(tp.topic, tp.partition, info.first_offset, -1, info.log_start_offset)


def _check_acks_all(state: PartitionState, min_insync: int, broker_id: int) -> None:
    if len(state.isr) < min_insync:
        raise NotEnoughReplicasError(
            f"{state.topic}-{state.partition}: ISR {list(state.isr)} is smaller than "
            f"min.insync.replicas {min_insync}",
            isr=list(state.isr),
            min_insync_replicas=min_insync,
        )
    if tuple(state.isr) != (broker_id,):
        raise InvalidRequestError(
            f"{state.topic}-{state.partition}: acks=all with followers in the ISR "
            f"{list(state.isr)} needs replication, which brokers do not do yet; use acks=1",
            isr=list(state.isr),
        )


async def _durable_then_visible(replica: Replica, end: int, replicas: ReplicaManager) -> None:
    """flush.mode=sync: consumers see the batches once an fsync covers them."""
    await replica.committer.wait_durable(end)
    replicas.advance_high_watermark(replica, end)


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
