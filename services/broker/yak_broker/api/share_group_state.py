"""The broker's share-group state as its wire model (``yak.api.share_groups``): the domain's
``ShareGroupLive`` (``share.group_state``) turned into ``ShareGroupLeaderState`` for
``GET /v1/share-groups/{group}``. Pure; pydantic stays on this side of the boundary."""

from __future__ import annotations

from yak.api.share_groups import ShareGroupLeaderState, SharePartitionState, ShareTopicCounters
from yak_broker.share.group_state import ShareGroupLive, SharePartitionLive, ShareTopicTotals

__all__ = ["leader_state"]


def leader_state(broker_id: int, group: str, live: ShareGroupLive) -> ShareGroupLeaderState:
    return ShareGroupLeaderState(
        broker_id=broker_id,
        group=group,
        partitions=[_partition(broker_id, p) for p in live.partitions],
        topics=[_counters(t) for t in live.topics],
    )


def _partition(broker_id: int, live: SharePartitionLive) -> SharePartitionState:
    base = SharePartitionState(
        topic=live.topic,
        partition=live.partition,
        leader_id=broker_id,
        leader_epoch=live.leader_epoch,
        loaded=live.loaded,
        high_watermark=live.high_watermark,
    )
    stats = live.stats
    if stats is None:
        return base
    return base.model_copy(
        update={
            "start_offset": live.start_offset,
            "scan_offset": live.scan_offset,
            "in_flight": stats.in_flight,
            "available": stats.available,
            "acquired": stats.acquired,
            "acknowledged": stats.acknowledged,
            "archived": stats.archived,
            "dead_letter_pending": stats.dead_letter_pending,
            "oldest_unacked_timestamp_ms": stats.oldest_unacked_timestamp_ms,
            "acquired_by_member": stats.acquired_by_member,
            "delivery_counts": live.delivery_counts,
            "lag": live.lag,
        }
    )


def _counters(totals: ShareTopicTotals) -> ShareTopicCounters:
    acked = totals.acknowledged
    return ShareTopicCounters(
        topic=totals.topic,
        acquired=totals.acquired,
        accepted=acked.get("accept", 0),
        released=acked.get("release", 0),
        rejected=acked.get("reject", 0),
        renewed=acked.get("renew", 0),
        expired=totals.expired,
        dead_lettered=totals.dead_lettered,
    )
