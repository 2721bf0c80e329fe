"""``publish``: one produce request of either dialect, validated whole before anything is sent.

Steps: the topic must exist (``UNKNOWN_TOPIC_OR_PARTITION``); every explicit partition must be
one of its partitions; every record must fit the topic's ``max.message.bytes``
(``MESSAGE_TOO_LARGE``, naming the record). Only when all records pass are they handed to the
producer, so a refused request writes nothing. Then each record gets its partition — explicit,
else Kafka's murmur2 of the key, else the sticky partitioner — and the answer is one
``ProducedRecord`` or typed error per record, in request order (records of one request that go
to the same partition keep their order and land in one batch unless the batch would be too big).
``enqueue`` does all of this but the wait, and returns a ``Publication`` whose ``results`` the
caller awaits: so a route can tell the time spent preparing the records from the time they
spent in the producer (``metrics.ProduceStats``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from yak.errors import (
    MessageTooLargeError,
    TooManyRecordsError,
    UnknownTopicOrPartitionError,
)
from yak.metadata.cache import ClusterSnapshot
from yak.partitioner import StickyPartitioner
from yak.record import RecordInput
from yak.topic_config import effective_config
from yak_rest_proxy.produce.producer import Producer, Result, record_size

__all__ = [
    "OutgoingRecord",
    "Publication",
    "check_record_count",
    "check_records",
    "enqueue",
    "max_message_bytes",
    "publish",
]

_BATCH_OVERHEAD = 61


class OutgoingRecord:
    """A record as a request gave it: bytes, headers, timestamp and an optional partition."""

    __slots__ = ("partition", "record", "size")

    def __init__(self, record: RecordInput, partition: int | None = None) -> None:
        self.record = record
        self.partition = partition
        self.size = record_size(record)


def _partition_count(snapshot: ClusterSnapshot, topic: str) -> int:
    record = snapshot.topics.get(topic)
    if record is None or record.deleting:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist", topic=topic)
    return record.partitions


def check_record_count(count: int, limit: int) -> None:
    """``TooManyRecordsError`` (413) when one request holds more than ``limit`` records."""
    if count > limit:
        raise TooManyRecordsError(
            f"the request holds {count:,} records; this proxy accepts at most {limit:,} in one "
            "request (YAK_MAX_RECORDS_PER_REQUEST): split it",
            records=count,
            limit=limit,
        )


def max_message_bytes(snapshot: ClusterSnapshot, topic: str) -> int:
    """The topic's ``max.message.bytes``: the largest batch (with one record: record) it takes."""
    return int(effective_config(snapshot.topics[topic].configs)["max.message.bytes"])


def check_records(snapshot: ClusterSnapshot, topic: str, records: Sequence[OutgoingRecord]) -> int:
    """The topic's partition count, once every record was found fit to send."""
    count = _partition_count(snapshot, topic)
    limit = max_message_bytes(snapshot, topic)
    for index, outgoing in enumerate(records):
        if outgoing.partition is not None and not 0 <= outgoing.partition < count:
            raise UnknownTopicOrPartitionError(
                f"records[{index}]: topic {topic!r} has no partition {outgoing.partition} "
                f"(it has {count})",
                topic=topic,
                partition=outgoing.partition,
            )
        size = outgoing.size + _BATCH_OVERHEAD
        if size > limit:
            raise MessageTooLargeError(
                f"records[{index}] is {size:,} bytes in a batch; topic {topic!r} accepts at "
                f"most {limit:,} (max.message.bytes)",
                topic=topic,
                record=index,
            )
    return count


class Publication:
    """The records of one request, handed to the producer: ``results`` waits for them."""

    __slots__ = ("_count", "_sent")

    def __init__(
        self, count: int, sent: list[tuple[list[int], asyncio.Future[list[Result]]]]
    ) -> None:
        self._count = count
        self._sent = sent

    async def results(self) -> list[Result]:
        """One result per record, in request order."""
        results: list[Result] = [None] * self._count  # type: ignore[list-item]  # all filled
        for indexes, future in self._sent:
            for index, result in zip(indexes, await future, strict=True):
                results[index] = result
        return results


async def publish(
    producer: Producer,
    partitioner: StickyPartitioner,
    snapshot: ClusterSnapshot,
    topic: str,
    records: Sequence[OutgoingRecord],
    *,
    acks: int,
) -> list[Result]:
    """Send ``records`` to ``topic``; one result per record (see the module docstring)."""
    return await enqueue(producer, partitioner, snapshot, topic, records, acks=acks).results()


def enqueue(
    producer: Producer,
    partitioner: StickyPartitioner,
    snapshot: ClusterSnapshot,
    topic: str,
    records: Sequence[OutgoingRecord],
    *,
    acks: int,
) -> Publication:
    """Check ``records`` and hand them to the producer (``publish`` without the wait)."""
    count = check_records(snapshot, topic, records)
    by_partition: dict[int, list[int]] = {}
    for index, outgoing in enumerate(records):
        partition = outgoing.partition
        if partition is None:  # murmur2 of the key, else sticky
            partition = partitioner.partition(topic, outgoing.record.key, count, outgoing.size)
        by_partition.setdefault(partition, []).append(index)
    sent = [
        (
            indexes,
            producer.send(
                topic,
                partition,
                [records[i].record for i in indexes],
                acks=acks,
                sizes=[records[i].size for i in indexes],
            ),
        )
        for partition, indexes in by_partition.items()
    ]
    return Publication(len(records), sent)
