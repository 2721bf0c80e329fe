"""``Acknowledger``: a member's acknowledgements, sent to the partitions' leaders.

All entries go at once: one ShareAcknowledge per leader, concurrently, each partition named
once with all its entries in the order given (``acknowledgements.by_partition``). Each entry
gets its own result (``acknowledgements.entry_results``): None when applied, else its typed
error (``INVALID_RECORD_STATE`` when the member does not hold the records — never acquired by
it, or its lock expired — and nothing of that entry changed). A partition whose leader moved or
could not be reached is sent once more after the metadata cache caught up with etcd. Single
event loop.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence

from yak.errors import UnknownServerError, UnknownTopicOrPartitionError, YakError
from yak.metadata.models import BrokerRegistration
from yak.protocol.kafka_share import ShareAcknowledgeRequest, SharePartitionAcks
from yak.security.acl import Operation, ResourceType
from yak_rest_proxy.brokers import leader_of
from yak_rest_proxy.consume.share.acknowledgements import (
    AckRange,
    RoundEntry,
    by_partition,
    entry_results,
)
from yak_rest_proxy.consume.share.share_metadata import (
    ShareClient,
    ShareLookup,
    check_member,
    leader_moved,
    topic_uuid,
)
from yak_rest_proxy.security.access import require

__all__ = ["Acknowledger"]


class Acknowledger:
    """Acknowledgements through the leaders (see the module docstring)."""

    def __init__(
        self, lookup: ShareLookup, client_of: Callable[[BrokerRegistration], ShareClient]
    ) -> None:
        self._lookup = lookup
        self._client_of = client_of

    async def acknowledge(
        self, group: str, member: str, entries: Sequence[AckRange]
    ) -> list[YakError | None]:
        """Per entry, None when applied or the error why not; ``GROUP_ID_NOT_FOUND`` (and
        nothing sent) for a group that does not exist."""
        check_member(member)
        await self._lookup.known_group(group)
        names = {entry.topic for entry in entries}
        require(ResourceType.TOPIC, names, Operation.READ)
        snapshot = await self._lookup.snapshot_of(names)
        ids = {}
        for name in names:
            record = snapshot.topics.get(name)
            topic_id = None if record is None or record.deleting else topic_uuid(record.topic_id)
            if topic_id is not None:
                ids[name] = topic_id
        results: list[YakError | None] = [None] * len(entries)
        sendable = []
        for position, entry in enumerate(entries):
            if entry.topic in ids:
                sendable.append(RoundEntry(position, entry))
            else:
                results[position] = UnknownTopicOrPartitionError(
                    f"topic {entry.topic!r} does not exist", topic=entry.topic
                )
        outcome = await self._send(group, member, sendable, ids)
        moved = [item for item in sendable if leader_moved(outcome[item.position])]
        if moved:
            await self._lookup.sync_partitions(
                (item.entry.topic, item.entry.partition) for item in moved
            )
            outcome.update(await self._send(group, member, moved, ids))
        for position, error in outcome.items():
            results[position] = error
        return results

    async def _send(
        self, group: str, member: str, items: list[RoundEntry], ids: dict[str, uuid.UUID]
    ) -> dict[int, YakError | None]:
        """One ShareAcknowledge per leader of ``items``, concurrently."""
        outcome: dict[int, YakError | None] = {}
        by_broker: dict[int, tuple[BrokerRegistration, list[list[RoundEntry]]]] = {}
        snapshot = self._lookup.snapshot
        for (topic, partition), sent in by_partition(items).items():
            try:
                broker = leader_of(snapshot, topic, partition)
            except YakError as exc:
                outcome.update({item.position: exc for item in sent})
                continue
            by_broker.setdefault(broker.broker_id, (broker, []))[1].append(sent)

        async def one(broker: BrokerRegistration, parts: list[list[RoundEntry]]) -> None:
            request = ShareAcknowledgeRequest(
                group,
                member,
                tuple(
                    SharePartitionAcks(
                        ids[sent[0].entry.topic],
                        sent[0].entry.partition,
                        tuple(item.entry.batch for item in sent),
                    )
                    for sent in parts
                ),
            )
            try:
                answered = await self._client_of(broker).share_acknowledge(request)
            except YakError as exc:
                outcome.update({item.position: exc for sent in parts for item in sent})
                return
            by_key = {(r.topic_id, r.partition): r for r in answered}
            for sent in parts:
                topic, partition = sent[0].entry.topic, sent[0].entry.partition
                result = by_key.get((ids[topic], partition))
                if result is None:
                    missing = UnknownServerError(
                        f"broker {broker.broker_id} did not answer for {topic}-{partition}"
                    )
                    outcome.update({item.position: missing for item in sent})
                else:
                    error = None if result.error is None else result.error.exception()
                    outcome.update(entry_results(sent, error, result.refused))

        await asyncio.gather(*(one(broker, parts) for broker, parts in by_broker.values()))
        return outcome
