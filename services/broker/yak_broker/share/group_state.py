"""The live state of one share group on this broker: its share-partitions led here and the
group's counters since this broker started (``GET /v1/share-groups/{group}``; the proxy sums
every broker's answer for ``/api/v1/share-groups/{group}``, the console and ``yak queue``).

Read-only and never loading: a share-partition is loaded on its first ShareFetch or
ShareAcknowledge (``ShareManager.driver``); one that was not yet (this broker leads the
partition, nobody read it since) is reported ``loaded=False`` with the partition's high
watermark only — reading its snapshot from the state topic to show it would cost what a
member's first request costs, on every look. Which partitions are reported: every loaded
share-partition of the group, plus, for the ``topics`` asked for, every partition of them led
here.

The counters (``share_metrics``) are this process's: they start at 0 when the broker starts
and stay with the broker that counted them when leadership moves, so summed over every broker
they are the cluster's since its brokers started, not since the group was created.

Single event loop (the drivers' machines are read between their inputs, never during one).
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Collection, Mapping
from typing import NamedTuple

from prometheus_client import Counter

from yak.errors import YakError
from yak.metadata.snapshot import ClusterSnapshot
from yak.types import TopicPartition
from yak_broker.share.share_metrics import ShareMetrics
from yak_broker.share.share_partition_driver import SharePartitionDriver
from yak_broker.share.share_reader import ShareLog
from yak_broker.share.state.records import RecordState, ShareStats
from yak_broker.share.state_store import SharePartitionKey

__all__ = ["ShareGroupLive", "SharePartitionLive", "ShareTopicTotals", "group_live_state"]

_UNACKED = (RecordState.AVAILABLE, RecordState.ACQUIRED)


class SharePartitionLive(NamedTuple):
    """One share-partition led here; ``start_offset``, ``scan_offset`` and ``stats`` are None
    when it is not loaded."""

    topic: str
    partition: int
    leader_epoch: int
    high_watermark: int
    start_offset: int | None
    scan_offset: int | None
    stats: ShareStats | None
    #: Delivery count -> records not yet acknowledged (available or acquired) that have it.
    delivery_counts: dict[int, int]

    @property
    def loaded(self) -> bool:
        return self.stats is not None

    @property
    def lag(self) -> int | None:
        """Records between SPSO and the high watermark neither acknowledged nor archived (an
        upper bound: offsets the log no longer holds, or a filter passed over, count)."""
        if self.stats is None or self.start_offset is None:
            return None
        done = self.stats.acknowledged + self.stats.archived
        return max(0, self.high_watermark - self.start_offset - done)


class ShareTopicTotals(NamedTuple):
    """The group's counters for one topic, since this broker started."""

    topic: str
    acquired: int
    #: By acknowledgement type: ``accept``, ``release``, ``reject``, ``renew``.
    acknowledged: dict[str, int]
    expired: int
    dead_lettered: int


class ShareGroupLive(NamedTuple):
    partitions: list[SharePartitionLive]
    topics: list[ShareTopicTotals]


def group_live_state(
    group: str,
    topics: Collection[str],
    drivers: Mapping[SharePartitionKey, SharePartitionDriver],
    snapshot: ClusterSnapshot,
    leader_log: Callable[[TopicPartition], tuple[ShareLog, int]],
    metrics: ShareMetrics,
) -> ShareGroupLive:
    """See the module doc; ``leader_log`` raises for partitions not led here."""
    found = {
        (key.topic, key.partition): _loaded(key, driver)
        for key, driver in drivers.items()
        if key.group == group and not driver.closed
    }
    for topic in topics:
        for state in snapshot.partitions_of(topic):
            if (topic, state.partition) in found:
                continue
            try:
                log, epoch = leader_log(TopicPartition(topic, state.partition))
            except YakError:
                continue  # led elsewhere: that leader answers for it
            found[(topic, state.partition)] = SharePartitionLive(
                topic, state.partition, epoch, log.high_watermark, None, None, None, {}
            )
    partitions = [found[key] for key in sorted(found)]
    return ShareGroupLive(partitions, topic_totals(metrics, group))


def _loaded(key: SharePartitionKey, driver: SharePartitionDriver) -> SharePartitionLive:
    machine = driver.machine
    counts = Tally(r.delivery_count for r in machine.records() if r.state in _UNACKED)
    return SharePartitionLive(
        key.topic,
        key.partition,
        machine.leader_epoch,
        driver.log.high_watermark,
        machine.start_offset,
        machine.scan_offset,
        machine.stats(),
        dict(sorted(counts.items())),
    )


def topic_totals(metrics: ShareMetrics, group: str) -> list[ShareTopicTotals]:
    """The group's counters per topic (every topic a share-partition of it was served for)."""
    acquired = _by_topic(metrics.acquired, group)
    expired = _by_topic(metrics.expired, group)
    dead = _by_topic(metrics.dead_lettered, group)
    acked: dict[str, dict[str, int]] = {}
    for labels, value in _samples(metrics.acknowledged, group):
        acked.setdefault(labels["topic"], {})[labels["type"]] = value
    named = sorted({*acquired, *expired, *dead, *acked})
    return [
        ShareTopicTotals(
            topic,
            acquired.get(topic, 0),
            acked.get(topic, {}),
            expired.get(topic, 0),
            dead.get(topic, 0),
        )
        for topic in named
    ]


def _by_topic(counter: Counter, group: str) -> dict[str, int]:
    return {labels["topic"]: value for labels, value in _samples(counter, group)}


def _samples(counter: Counter, group: str) -> list[tuple[dict[str, str], int]]:
    """The ``_total`` samples of ``counter`` labelled with ``group``."""
    return [
        (sample.labels, int(sample.value))
        for family in counter.collect()
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels.get("group") == group
    ]
