"""Driver-side look-ups of the ``yak`` source: which partitions a query reads, and from where.

``discover`` turns a subscription into topic-partitions as the cluster has them now: every
partition of the ``subscribe`` topics (an unknown topic is an error naming the option), of the
topics whose whole name matches ``subscribePattern`` (none yet is fine), or exactly the
``assign``ed ones. ``resolve`` turns an ``OffsetSpec`` into numbers with the partitions'
current log start offsets and high watermarks; ``by_timestamp`` finds the first record at or
after a timestamp (the high watermark if there is none).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from yak.errors import UnknownTopicOrPartitionError
from yak.spark.client import YakHttp
from yak.spark.options import EARLIEST, LATEST, Assign, OffsetSpec, OptionError, Subscribe
from yak.spark.options import Subscription as SubscriptionOption
from yak.types import TopicPartition

__all__ = ["Bounds", "bounds", "by_timestamp", "discover", "resolve"]

#: (log start offset, high watermark) per partition.
Bounds = dict[TopicPartition, tuple[int, int]]


def discover(
    http: YakHttp, subscription: SubscriptionOption, *, missing_ok: bool = False
) -> list[TopicPartition]:
    """The topic-partitions ``subscription`` stands for now, sorted; a ``subscribe`` topic that
    does not exist is an ``OptionError`` unless ``missing_ok`` (streams wait for it)."""
    if isinstance(subscription, Assign):
        return sorted(TopicPartition(t, p) for t, ps in subscription.partitions for p in ps)
    if isinstance(subscription, Subscribe):
        topics = list(subscription.topics)
    else:
        pattern = re.compile(subscription.pattern)
        listed = http.list_topics().topics
        topics = [t.name for t in listed if not t.deleting and pattern.fullmatch(t.name)]
    found: list[TopicPartition] = []
    for topic in topics:
        try:
            description = http.describe_topic(topic)
        except UnknownTopicOrPartitionError:
            if isinstance(subscription, Subscribe) and not missing_ok:
                raise OptionError("subscribe", f"topic {topic!r} does not exist") from None
            continue  # deleted since it was listed
        found.extend(TopicPartition(topic, p) for p in range(description.partition_count))
    return sorted(found)


def bounds(http: YakHttp, partitions: Iterable[TopicPartition]) -> Bounds:
    """Log start offset and high watermark of each partition."""
    return {tp: http.bounds(tp.topic, tp.partition) for tp in partitions}


def resolve(spec: OffsetSpec, option: str, partition_bounds: Bounds) -> dict[TopicPartition, int]:
    """The offset ``spec`` asks for in each partition of ``partition_bounds`` (a number is
    kept as given: the read decides whether it is lost). A partition the spec names but the
    query does not read is an ``OptionError``."""
    unknown = [f"{t}-{p}" for t, p, _ in spec.specific if (t, p) not in partition_bounds]
    if unknown:
        raise OptionError(option, f"names partitions the query does not read: {unknown}")
    offsets = {}
    for tp, (log_start, high_watermark) in partition_bounds.items():
        wanted = spec.for_partition(tp.topic, tp.partition)
        if wanted == EARLIEST:
            offsets[tp] = log_start
        elif wanted == LATEST:
            offsets[tp] = high_watermark
        else:
            offsets[tp] = wanted
    return offsets


def by_timestamp(
    http: YakHttp, timestamp_ms: int, partition_bounds: Mapping[TopicPartition, tuple[int, int]]
) -> dict[TopicPartition, int]:
    """Per partition, the offset of the first record whose timestamp is at or after
    ``timestamp_ms`` (else the high watermark), as Kafka's offsetsForTimes: ListOffsets finds
    its batch, then the batch's earlier records are skipped."""
    offsets = {}
    for tp, (_, high_watermark) in partition_bounds.items():
        found = http.offset_for(tp.topic, tp.partition, timestamp_ms)
        offset = high_watermark if found < 0 else found
        while offset < high_watermark:
            page = http.read(tp.topic, tp.partition, offset, 1024 * 1024)
            later = [r.offset for r in page.records if r.timestamp >= timestamp_ms]
            if later or page.next_offset <= offset:
                offset = later[0] if later else page.next_offset
                break
            offset = page.next_offset
        offsets[tp] = offset
    return offsets
