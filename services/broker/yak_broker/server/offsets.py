"""ListOffsets, DeleteRecords, OffsetsForLeaderEpoch and the hosted-partition listing.

ListOffsets answers from the leader, for consumers: ``LATEST`` (-1) is the high watermark,
``EARLIEST`` (-2) the log start offset, a timestamp (ms) the base offset of the first batch
whose max timestamp is >= it (batch granularity: the broker does not decode records), or -1 when
no batch below the high watermark qualifies. DeleteRecords moves the log start offset up to the
given offset (-1: the high watermark); whole segments below it are deleted. Each partition
answers on its own: an error (unknown, not leader, out of range) fails only that partition.
OffsetsForLeaderEpoch is asked by followers (``LeaderPartition.answer_epoch_query``).
"""

from __future__ import annotations

from collections.abc import Sequence

from yak.errors import YakError
from yak.protocol.broker_models import (
    LATEST,
    DeleteRecordsPartition,
    DeleteRecordsResult,
    EpochEndOffset,
    ErrorBody,
    HostedPartition,
    OffsetForLeaderEpoch,
    OffsetResult,
)
from yak_broker.replication.replica_manager import ReplicaManager
from yak_broker.storage.log_manager import TopicPartition

__all__ = ["delete_records", "hosted_partitions", "list_offsets", "offsets_for_leader_epoch"]


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


def hosted_partitions(replicas: ReplicaManager) -> list[HostedPartition]:
    hosted = []
    for tp, replica in sorted(replicas.replicas.items()):
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
