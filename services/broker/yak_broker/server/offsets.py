"""ListOffsets, DeleteRecords, OffsetsForLeaderEpoch and the hosted-partition listing.

ListOffsets answers from the leader, for consumers: ``LATEST`` (-1) is the high watermark,
``EARLIEST`` (-2) the log start offset, a timestamp (ms) the base offset of the first batch
whose max timestamp is >= it (batch granularity: the broker does not decode records), or -1 when
no batch below the high watermark qualifies. DeleteRecords moves the log start offset up to the
given offset (-1: the high watermark); whole segments below it are deleted. Each partition
answers on its own: an error (unknown, not leader, out of range) fails only that partition.
OffsetsForLeaderEpoch is asked by followers (``LeaderPartition.answer_epoch_query``).

``list_offsets_when_ready`` (the HTTP route's, which the rest-proxy resolves a consumer's
start position with) first waits, up to ``READY_WAIT_S``, for leaderships the metadata names
here but the broker has not installed yet (``ReplicaNotReadyError``: a topic just created, a
new leader epoch being stamped) — woken when the replica is installed, as a consumer's fetch
is (``fetcher``) — so a consumer that starts right after its topic was created is not handed
a leader's start-up. Kafka clients, which retry ``NOT_LEADER_OR_FOLLOWER`` themselves, are
answered at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence

from yak.errors import YakError
from yak.protocol.broker_models import (
    LATEST,
    DeleteRecordsPartition,
    DeleteRecordsResult,
    EpochEndOffset,
    ErrorBody,
    HostedPartition,
    HostedTopic,
    OffsetForLeaderEpoch,
    OffsetResult,
)
from yak.types import TopicPartition
from yak_broker.replication.replica_manager import ReplicaManager, ReplicaNotReadyError

#: Replicas listed or summed between two yields of the event loop.
CHUNK = 1_000
#: How long ``list_offsets_when_ready`` waits for leaderships to be installed (a metadata
#: pass takes milliseconds; a log creation held by a busy disk a little more).
READY_WAIT_S = 2.0

__all__ = [
    "delete_records",
    "hosted_partitions",
    "hosted_topics",
    "list_offsets",
    "list_offsets_when_ready",
    "offsets_for_leader_epoch",
]


def list_offsets(
    replicas: ReplicaManager, partitions: Sequence[TopicPartition], timestamp: int
) -> list[OffsetResult]:
    results = []
    for tp in partitions:
        try:
            replica, _ = replicas.leader(tp)
            offset = replica.log.offset_for_timestamp(timestamp)
            results.append(
                OffsetResult(
                    topic=tp.topic,
                    partition=tp.partition,
                    timestamp=timestamp,
                    offset=-1 if offset is None else offset,
                )
            )
        except YakError as exc:
            results.append(
                OffsetResult(
                    topic=tp.topic,
                    partition=tp.partition,
                    timestamp=timestamp,
                    error=ErrorBody.of(exc),
                )
            )
    return results


async def list_offsets_when_ready(
    replicas: ReplicaManager,
    partitions: Sequence[TopicPartition],
    timestamp: int,
    wait_s: float = READY_WAIT_S,
) -> list[OffsetResult]:
    """``list_offsets`` once every partition led here is installed, or ``wait_s`` passed
    (then the not-ready ones answer ``NOT_LEADER_OR_FOLLOWER``, retriable); see the module doc."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while (pending := [tp for tp in partitions if _not_ready(replicas, tp)]) and (
        remaining := deadline - loop.time()
    ) > 0:
        with replicas.waiters.watching(pending) as waiter:
            waiter.arm()
            if any(_not_ready(replicas, tp) for tp in pending):  # not installed meanwhile
                await waiter.wait(remaining)
    return list_offsets(replicas, partitions, timestamp)


def _not_ready(replicas: ReplicaManager, tp: TopicPartition) -> bool:
    try:
        replicas.leader(tp)
    except ReplicaNotReadyError:
        return True
    except YakError:
        return False  # another answer, given at once
    return False


def delete_records(
    replicas: ReplicaManager, partitions: Sequence[DeleteRecordsPartition]
) -> list[DeleteRecordsResult]:
    results = []
    for wanted in partitions:
        tp = TopicPartition(wanted.topic, wanted.partition)
        try:
            replica, _ = replicas.leader(tp)
            log = replica.log
            offset = log.high_watermark if wanted.offset == LATEST else wanted.offset
            low = log.delete_records(offset)
            results.append(
                DeleteRecordsResult(topic=tp.topic, partition=tp.partition, low_watermark=low)
            )
        except YakError as exc:
            results.append(
                DeleteRecordsResult(topic=tp.topic, partition=tp.partition, error=ErrorBody.of(exc))
            )
    return results


def offsets_for_leader_epoch(
    replicas: ReplicaManager, partitions: Sequence[OffsetForLeaderEpoch]
) -> list[EpochEndOffset]:
    results = []
    for wanted in partitions:
        tp = TopicPartition(wanted.topic, wanted.partition)
        try:
            _, leader = replicas.leader_partition(tp)
            epoch, end = leader.answer_epoch_query(wanted.current_leader_epoch, wanted.leader_epoch)
            results.append(
                EpochEndOffset(
                    topic=tp.topic, partition=tp.partition, leader_epoch=epoch, end_offset=end
                )
            )
        except YakError as exc:
            results.append(
                EpochEndOffset(topic=tp.topic, partition=tp.partition, error=ErrorBody.of(exc))
            )
    return results


async def hosted_partitions(
    replicas: ReplicaManager, topics: Collection[str] | None = None
) -> list[HostedPartition]:
    """Every replica here (of ``topics`` only, when given), in topic-partition order; yields
    the loop every ``CHUNK`` replicas (20,000 of them take a good part of a second)."""
    hosted = []
    for index, (tp, replica) in enumerate(sorted(replicas.replicas.items()), 1):
        if index % CHUNK == 0:
            await asyncio.sleep(0)
        if topics is not None and tp.topic not in topics:
            continue
        log, state = replica.log, replica.state
        hosted.append(
            HostedPartition(
                topic=tp.topic,
                partition=tp.partition,
                topic_id=replica.topic_id,
                is_leader=state.leader == replicas.broker_id,
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                replicas=list(state.replicas),
                isr=list(state.isr),
                log_start_offset=log.log_start_offset,
                high_watermark=log.high_watermark,
                log_end_offset=log.log_end_offset,
                size_bytes=log.size,
                segments=len(log.segments),
            )
        )
    return hosted


async def hosted_topics(replicas: ReplicaManager) -> list[HostedTopic]:
    """The replicas here summed per topic, in topic order: one pass, no per-replica output,
    yielding the loop every ``CHUNK`` replicas."""
    sums: dict[str, list[int]] = {}
    me = replicas.broker_id
    for index, (tp, replica) in enumerate(list(replicas.replicas.items()), 1):
        if index % CHUNK == 0:
            await asyncio.sleep(0)
        log = replica.log
        size = log.size
        row = sums.get(tp.topic)
        if row is None:
            row = sums[tp.topic] = [0, 0, 0, 0, 0, 0]
        row[0] += 1
        row[2] += size
        if replica.state.leader == me:
            hw = log.high_watermark
            row[1] += 1
            row[3] += size
            row[4] += max(0, hw - log.log_start_offset)
            row[5] += hw
    return [
        HostedTopic(
            topic=topic,
            replicas=row[0],
            leaders=row[1],
            size_bytes=row[2],
            leader_size_bytes=row[3],
            records=row[4],
            high_watermark_sum=row[5],
        )
        for topic, row in sorted(sums.items())
    ]
