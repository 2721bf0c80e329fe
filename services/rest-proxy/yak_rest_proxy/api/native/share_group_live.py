"""The live part of ``GET /api/v1/share-groups/{group}``: every registered broker asked for
the group's share-partitions it leads (``GET /v1/share-groups/{group}`` there, concurrently,
each bounded by a timeout) and the answers summed (``ShareGroupLive``).

Which partitions: a share-partition lives on its partition's leader, loaded on its first
acquire or acknowledgement there, and nothing records which topics a share group reads (its
members name them per request). So every broker is asked and each reports the share-partitions
of the group it holds; with ``?topic=`` it also reports its led partitions of those topics that
nobody has read since it became their leader (not loaded). Asking every broker, not only the
leaders of some topics, also collects the counters of brokers that no longer lead a partition
they served. A broker that does not answer is listed in ``errors``; one that does not know the
group yet (its metadata behind the coordinator's) holds nothing of it.

When leadership just moved, the old and the new leader may both report a share-partition for
a moment: the higher leader epoch wins.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

from yak.api.share_groups import (
    ShareBrokerError,
    ShareGroupLeaderState,
    ShareGroupLive,
    ShareGroupTotals,
    SharePartitionState,
    ShareTopicCounters,
)
from yak.errors import GroupIdNotFoundError, YakError
from yak.metadata.models import BrokerRegistration
from yak_rest_proxy.runtime import ProxyRuntime

__all__ = ["gather_live_state", "sum_live_state"]

#: How long one broker may take before it is listed in ``errors``.
_BROKER_TIMEOUT_S = 5.0
_COUNTERS = ("acquired", "accepted", "released", "rejected", "renewed", "expired", "dead_lettered")


async def gather_live_state(
    runtime: ProxyRuntime, group: str, topics: Sequence[str]
) -> ShareGroupLive:
    """Ask every registered broker (see the module doc) and sum the answers."""
    brokers = [b for _id, b in sorted(runtime.cache.snapshot.brokers.items())]
    answers = await asyncio.gather(*(_ask(runtime, b, group, topics) for b in brokers))
    return sum_live_state(answers)


async def _ask(
    runtime: ProxyRuntime, broker: BrokerRegistration, group: str, topics: Sequence[str]
) -> ShareGroupLeaderState | ShareBrokerError:
    try:
        async with asyncio.timeout(_BROKER_TIMEOUT_S):
            return await runtime.brokers.client(broker).share_group_state(group, topics)
    except GroupIdNotFoundError:
        return ShareGroupLeaderState(
            broker_id=broker.broker_id, group=group, partitions=[], topics=[]
        )
    except (YakError, OSError, TimeoutError) as exc:
        return ShareBrokerError(broker_id=broker.broker_id, error=str(exc) or type(exc).__name__)


def sum_live_state(answers: Iterable[ShareGroupLeaderState | ShareBrokerError]) -> ShareGroupLive:
    """The brokers' answers as one: partitions by topic and partition (the higher leader epoch
    where two brokers report one), counters summed per topic, totals over both."""
    partitions: dict[tuple[str, int], SharePartitionState] = {}
    counters: dict[str, dict[str, int]] = {}
    errors: list[ShareBrokerError] = []
    for answer in answers:
        if isinstance(answer, ShareBrokerError):
            errors.append(answer)
            continue
        for part in answer.partitions:
            key = (part.topic, part.partition)
            known = partitions.get(key)
            if known is None or (part.leader_epoch, part.loaded) > (
                known.leader_epoch,
                known.loaded,
            ):
                partitions[key] = part
        for topic in answer.topics:
            sums = counters.setdefault(topic.topic, dict.fromkeys(_COUNTERS, 0))
            for name in _COUNTERS:
                sums[name] += getattr(topic, name)
    parts = [partitions[key] for key in sorted(partitions)]
    topics = [ShareTopicCounters(topic=t, **sums) for t, sums in sorted(counters.items())]
    return ShareGroupLive(
        totals=_totals(parts, topics), partitions=parts, topics=topics, errors=errors
    )


def _totals(
    parts: Sequence[SharePartitionState], topics: Sequence[ShareTopicCounters]
) -> ShareGroupTotals:
    oldest = [
        p.oldest_unacked_timestamp_ms for p in parts if p.oldest_unacked_timestamp_ms is not None
    ]
    return ShareGroupTotals(
        in_flight=sum(p.in_flight for p in parts),
        available=sum(p.available for p in parts),
        acquired=sum(p.acquired for p in parts),
        acknowledged=sum(t.accepted for t in topics),
        dead_lettered=sum(t.dead_lettered for t in topics),
        dead_letter_pending=sum(p.dead_letter_pending for p in parts),
        lag=sum(p.lag or 0 for p in parts),
        oldest_unacked_timestamp_ms=min(oldest, default=None),
    )
