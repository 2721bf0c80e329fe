"""Dead letters: the copy of a record a share group gave up on, produced to the group's
dead-letter topic (docs/decisions.md, "Share groups: where their state lives").

A copy keeps the original's key, value, headers and timestamp and adds, as UTF-8 headers:

=========================== ==================================================
``yak-dlq-topic``           the topic the record came from
``yak-dlq-partition``       its partition (decimal)
``yak-dlq-offset``          its offset (decimal)
``yak-dlq-delivery-count``  how often it was delivered (decimal)
``yak-dlq-reason``          ``rejected`` or ``max delivery attempts``
``yak-dlq-group``           the share group
=========================== ==================================================

The copies of one share-partition's pending dead letters go in one batch to one partition of
the dead-letter topic (the source partition modulo the topic's partitions, so one source
partition's dead letters keep their order), acks=all. At least once: the driver marks them
``dead_lettered`` (and persists) only after the produce succeeded, so a crash in between
copies them again. ``DeadLetterSink`` is the narrow interface the driver uses;
``LeaderProducer`` is the broker's, through the internal plane to the partition's leader (this
broker included). Single event loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Protocol

from yak.clients.broker import BrokerClient
from yak.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from yak.metadata.snapshot import ClusterSnapshot
from yak.record import Record, RecordInput, encode_batch
from yak.record.record import Header
from yak_broker.share.state.records import DeadLetter

__all__ = [
    "DLQ_HEADERS",
    "DeadLetterSink",
    "LeaderProducer",
    "dead_letter_copy",
]

DLQ_HEADERS = (
    "yak-dlq-topic",
    "yak-dlq-partition",
    "yak-dlq-offset",
    "yak-dlq-delivery-count",
    "yak-dlq-reason",
    "yak-dlq-group",
)


class DeadLetterSink(Protocol):
    """Produces dead-letter copies with acks=all; raises when they are not all durable."""

    async def produce(
        self, topic: str, source_partition: int, records: Sequence[RecordInput]
    ) -> None: ...


def dead_letter_copy(
    record: Record, letter: DeadLetter, *, group: str, topic: str, partition: int
) -> RecordInput:
    """The copy of ``record`` for the dead-letter topic (headers in the module doc)."""
    values = (topic, partition, letter.offset, letter.delivery_count, letter.reason.text, group)
    added: tuple[Header, ...] = tuple(
        (name, str(value).encode()) for name, value in zip(DLQ_HEADERS, values, strict=True)
    )
    return RecordInput(record.key, record.value, record.headers + added, record.timestamp)


class LeaderProducer:
    """A ``DeadLetterSink`` producing to the dead-letter partition's leader (one client per
    broker, reused; closed with ``aclose``)."""

    def __init__(
        self,
        snapshot: Callable[[], ClusterSnapshot],
        client_factory: Callable[[str, int | None], BrokerClient] | None = None,
    ) -> None:
        self._snapshot = snapshot
        self._factory = client_factory or _client
        self._clients: dict[tuple[str, int | None], BrokerClient] = {}

    async def produce(
        self, topic: str, source_partition: int, records: Sequence[RecordInput]
    ) -> None:
        snapshot = self._snapshot()
        record = snapshot.topics.get(topic)
        if record is None or record.deleting:
            raise UnknownTopicOrPartitionError(f"dead-letter topic {topic} does not exist")
        partition = source_partition % record.partitions
        leader = snapshot.leader_of(topic, partition)
        if leader is None:
            raise NotLeaderOrFollowerError(
                f"dead-letter partition {topic}-{partition} has no leader"
            )
        where = (leader.url, leader.data_port)
        client = self._clients.get(where)
        if client is None:
            client = self._clients[where] = self._factory(*where)
        await client.produce_one(topic, partition, encode_batch(records), acks=-1)

    async def aclose(self) -> None:
        clients, self._clients = self._clients, {}
        for client in clients.values():
            with contextlib.suppress(Exception):
                await client.aclose()


def _client(url: str, data_port: int | None) -> BrokerClient:
    return BrokerClient(url, timeout_s=30.0, data_port=data_port)
