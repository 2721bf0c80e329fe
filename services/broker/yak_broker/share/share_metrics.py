"""Share-group metrics on the broker's ``/metrics`` (the partitions' leaders count them; each
share-partition lives on one leader, so summing the brokers' series counts each once).

Counters, per group and topic, counted once per input (never per record decoded):

- ``yak_share_records_acquired_total``: records handed to members (redeliveries included);
- ``yak_share_records_acknowledged_total{type}``: accepted, released, rejected, renewed
  (records in applied batches);
- ``yak_share_records_expired_total``: locks that expired (the record offered again or
  archived at the delivery limit);
- ``yak_share_records_dead_lettered_total``: records copied to the dead-letter topic, or
  archived without a copy when the group has none.

A histogram, ``yak_share_state_save_seconds``: each save of share-partition snapshots to the
share-state store (one lane's group commit: one acks=all write), from its start to its answer
— what an acquisition or acknowledgement waits for before it is answered.

Gauges per group, computed at scrape time from the share-partitions led here
(``ShareCollector``, fed ``(group, ShareStats)`` pairs): in flight, held (acquired, not yet
answered: ``yak_share_records_held``), available,
archived records whose dead-letter copy is pending, and the age in seconds of the oldest
record not yet acknowledged (``yak_share_oldest_unacked_age_seconds``; 0 when none).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from yak_broker.share.state.records import AcknowledgeType, ShareStats

__all__ = ["SAVE_BUCKETS", "ShareCollector", "ShareCounters", "ShareMetrics"]

#: Seconds: a save is one replicated write, ~1 ms idle, tens of ms under load.
SAVE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

_ACK_NAMES = {
    AcknowledgeType.ACCEPT: "accept",
    AcknowledgeType.RELEASE: "release",
    AcknowledgeType.REJECT: "reject",
    AcknowledgeType.RENEW: "renew",
}


class ShareMetrics:
    """The share counters of one broker (families; ``counters`` binds a group and topic)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        labels = ["group", "topic"]
        self.acquired = Counter(
            "yak_share_records_acquired", "Records acquired by share-group members.",
            labels, registry=registry,
        )  # fmt: skip
        self.acknowledged = Counter(
            "yak_share_records_acknowledged", "Records acknowledged by share-group members.",
            [*labels, "type"], registry=registry,
        )  # fmt: skip
        self.expired = Counter(
            "yak_share_records_expired", "Acquisition locks of share groups that expired.",
            labels, registry=registry,
        )  # fmt: skip
        self.dead_lettered = Counter(
            "yak_share_records_dead_lettered",
            "Records a share group gave up on, copied to its dead-letter topic or archived.",
            labels, registry=registry,
        )  # fmt: skip
        self.save_seconds = Histogram(
            "yak_share_state_save_seconds",
            "Saves of share-partition snapshots to the share-state store, start to answer.",
            buckets=SAVE_BUCKETS, registry=registry,
        )  # fmt: skip

    def counters(self, group: str, topic: str) -> ShareCounters:
        return ShareCounters(self, group, topic)


class ShareCounters:
    """The counters of one group and topic (label lookups done once per share-partition)."""

    __slots__ = ("_acknowledged", "acquired", "dead_lettered", "expired")

    def __init__(self, metrics: ShareMetrics, group: str, topic: str) -> None:
        self.acquired = metrics.acquired.labels(group, topic)
        self.expired = metrics.expired.labels(group, topic)
        self.dead_lettered = metrics.dead_lettered.labels(group, topic)
        self._acknowledged = {
            kind: metrics.acknowledged.labels(group, topic, name)
            for kind, name in _ACK_NAMES.items()
        }

    def acknowledged(self, kind: AcknowledgeType) -> Counter:
        return self._acknowledged[kind]


class ShareCollector(Collector):
    """Per-group gauges at scrape time (see the module doc)."""

    def __init__(
        self, stats: Callable[[], Iterable[tuple[str, ShareStats]]], now_ms: Callable[[], int]
    ) -> None:
        self._stats = stats
        self._now_ms = now_ms

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())  # unchecked: its series follow the share groups led here

    def collect(self) -> Iterator[GaugeMetricFamily]:
        names = {
            "in_flight": "Records in the share-partitions' in-flight windows.",
            # Not "acquired": that is the counter's base name (yak_share_records_acquired_total),
            # and one name must not be two families in OpenMetrics.
            "held": "Records acquired by members and not yet acknowledged.",
            "available": "Records in flight waiting for a member.",
            "dead_letter_pending": "Archived records whose dead-letter copy is pending.",
        }
        families = {
            name: GaugeMetricFamily(f"yak_share_records_{name}", doc, labels=["group"])
            for name, doc in names.items()
        }
        oldest = GaugeMetricFamily(
            "yak_share_oldest_unacked_age_seconds",
            "Age of the oldest record of the group not yet acknowledged (0: none).",
            labels=["group"],
        )
        totals: dict[str, list[int]] = {}
        ages: dict[str, int] = {}
        now = self._now_ms()
        for group, stats in self._stats():
            sums = totals.setdefault(group, [0, 0, 0, 0])
            sums[0] += stats.in_flight
            sums[1] += stats.acquired
            sums[2] += stats.available
            sums[3] += stats.dead_letter_pending
            if stats.oldest_unacked_timestamp_ms is not None:
                age = max(now - stats.oldest_unacked_timestamp_ms, 0)
                ages[group] = max(ages.get(group, 0), age)
        for group, sums in sorted(totals.items()):
            for family, value in zip(families.values(), sums, strict=True):
                family.add_metric([group], value)
            oldest.add_metric([group], ages.get(group, 0) / 1000)
        yield from families.values()
        yield oldest
