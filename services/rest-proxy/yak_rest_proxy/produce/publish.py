"""``publish``: one produce request of either dialect, validated whole before anything is sent.

Steps: the topic must exist (``UNKNOWN_TOPIC_OR_PARTITION``); every explicit partition must be
one of its partitions; every record, in a batch of its own, must fit the topic's
``max.message.bytes`` and one segment (``segment.bytes``) (``MESSAGE_TOO_LARGE``, naming the
record and the limit). Only when all records pass are they handed to the producer, so a
refused request writes nothing. Then each record gets its partition — explicit,
else Kafka's murmur2 of the key, else the keyless records' partitioner the caller passes
(sticky, round-robin or load-aware: ``produce.partitioners``) — and the answer is one
``ProducedRecord`` or typed error per record, in request order (records of one request that go
to the same partition keep their order and land in one batch unless the batch would be too big).
``enqueue`` does all of this but the wait, and returns a ``Publication`` whose ``results`` the
caller awaits: so a route can tell the time spent preparing the records from the time they
spent in the producer (``metrics.ProduceStats``).

A request's records come as ``OutgoingRecord``-s, or as ``RequestRecords``: the same records in
columns, each one's body already encoded (what the native produce's body parser makes), which
go to the producer without an object per record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from itertools import compress, islice, repeat
from operator import ne
from typing import overload

from yak.errors import (
    MessageTooLargeError,
    TooManyRecordsError,
    UnknownTopicOrPartitionError,
)
from yak.metadata.cache import ClusterSnapshot
from yak.partitioner import Partitioner
from yak.record import RecordInput
from yak.record.record_decoder import decode_records
from yak.record.record_encoder import encode_bodies
from yak.topic_config import effective_config
from yak_rest_proxy.produce.accumulator import Result, batch_limit, record_size
from yak_rest_proxy.produce.producer import Producer

__all__ = [
    "OutgoingRecord",
    "Publication",
    "RequestRecords",
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


class RequestRecords(Sequence[OutgoingRecord]):
    """The records of one request in columns: keys (for the partitioner), bodies
    (``yak.record.record_encoder.encode_record_body``), timestamps, ``record_size``-s and the
    explicit partitions (``None``: none was given). Indexing decodes an ``OutgoingRecord`` back
    from its body (for inspection: ``enqueue`` reads the columns)."""

    __slots__ = ("bodies", "keys", "partitions", "sizes", "timestamps")

    def __init__(
        self,
        keys: list[bytes | None],
        bodies: list[bytes],
        timestamps: list[int],
        sizes: list[int],
        partitions: list[int | None] | None = None,
    ) -> None:
        self.keys = keys
        self.bodies = bodies
        self.timestamps = timestamps
        self.sizes = sizes
        self.partitions = partitions

    def __len__(self) -> int:
        return len(self.bodies)

    @overload
    def __getitem__(self, index: int) -> OutgoingRecord: ...
    @overload
    def __getitem__(self, index: slice) -> list[OutgoingRecord]: ...
    def __getitem__(self, index: int | slice) -> OutgoingRecord | list[OutgoingRecord]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        stamp = self.timestamps[index]
        section = encode_bodies([self.bodies[index]], [stamp]).data
        (decoded,) = decode_records(section, 0, len(section), 1, 0, stamp, 0)
        record = RecordInput(decoded.key, decoded.value, decoded.headers, stamp)
        return OutgoingRecord(record, None if self.partitions is None else self.partitions[index])


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
    limit = batch_limit(snapshot.topics[topic].configs)
    if isinstance(records, RequestRecords):  # the columns: in C, unless one record fails
        explicit = records.partitions
        fits = explicit is None or all(p is None or 0 <= p < count for p in explicit)
        if fits and max(records.sizes, default=0) + _BATCH_OVERHEAD <= limit:
            return count
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
                f"most {limit:,} ({_limit_name(snapshot, topic, limit)})",
                topic=topic,
                record=index,
            )
    return count


def _limit_name(snapshot: ClusterSnapshot, topic: str, limit: int) -> str:
    """Which config sets ``batch_limit``: ``max.message.bytes`` unless a segment is smaller."""
    if limit < max_message_bytes(snapshot, topic):
        return "segment.bytes: a batch must fit in one segment"
    return "max.message.bytes"


class Publication:
    """The records of one request, handed to the producer: ``results`` waits for them."""

    __slots__ = ("_count", "_sent")

    def __init__(
        self, count: int, sent: list[tuple[Sequence[int], asyncio.Future[list[Result]]]]
    ) -> None:
        self._count = count
        self._sent = sent

    async def results(self) -> list[Result]:
        """One result per record, in request order."""
        if len(self._sent) == 1 and isinstance(self._sent[0][0], range):  # all, in order
            return await self._sent[0][1]
        results: list[Result] = [None] * self._count  # type: ignore[list-item]  # all filled
        for indexes, future in self._sent:
            for index, result in zip(indexes, await future, strict=True):
                results[index] = result
        return results


async def publish(
    producer: Producer,
    partitioner: Partitioner,
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
    partitioner: Partitioner,
    snapshot: ClusterSnapshot,
    topic: str,
    records: Sequence[OutgoingRecord],
    *,
    acks: int,
) -> Publication:
    """Check ``records`` and hand them to the producer (``publish`` without the wait)."""
    count = check_records(snapshot, topic, records)
    if isinstance(records, RequestRecords):
        return _enqueue_columns(producer, partitioner, topic, count, records, acks)
    by_partition: dict[int, list[int]] = {}
    for index, outgoing in enumerate(records):
        partition = outgoing.partition
        if partition is None:  # murmur2 of the key, else the keyless strategy
            partition = partitioner.partition(topic, outgoing.record.key, count, outgoing.size)
        by_partition.setdefault(partition, []).append(index)
    sent: list[tuple[Sequence[int], asyncio.Future[list[Result]]]] = [
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


def _enqueue_columns(
    producer: Producer,
    partitioner: Partitioner,
    topic: str,
    count: int,
    records: RequestRecords,
    acks: int,
) -> Publication:
    """``enqueue`` of checked ``RequestRecords``: the same partitions, the same queues."""
    keys, sizes, explicit = records.keys, records.sizes, records.partitions
    partition = partitioner.partition
    if explicit is None:
        partitions = list(map(partition, repeat(topic), keys, repeat(count), sizes))
    else:
        partitions = [
            partition(topic, key, count, size) if given is None else given
            for given, key, size in zip(explicit, keys, sizes, strict=True)
        ]
    bodies, timestamps = records.bodies, records.timestamps
    total = len(partitions)
    # Where the partition changes: the sticky partitioner gives runs, taken a run at a time
    # (slices, in C) rather than a record at a time.
    starts = [0, *compress(range(1, total), map(ne, partitions, islice(partitions, 1, None)))]
    if len(starts) == 1:  # one partition: the columns as they are
        future = producer.send_bodies(topic, partitions[0], bodies, timestamps, sizes, acks=acks)
        return Publication(total, [(range(total), future)])
    runs: dict[int, tuple[list[int], list[bytes], list[int], list[int]]] = {}
    for start, end in zip(starts, [*starts[1:], total], strict=True):
        run = runs.get(partitions[start])
        if run is None:
            run = runs[partitions[start]] = ([], [], [], [])
        run[0].extend(range(start, end))
        run[1].extend(bodies[start:end])
        run[2].extend(timestamps[start:end])
        run[3].extend(sizes[start:end])
    sent: list[tuple[Sequence[int], asyncio.Future[list[Result]]]] = [
        (indexes, producer.send_bodies(topic, chosen, run_bodies, stamps, run_sizes, acks=acks))
        for chosen, (indexes, run_bodies, stamps, run_sizes) in runs.items()
    ]
    return Publication(len(partitions), sent)
