"""``Acknowledger``: a member's acknowledgements, sent to the partitions' leaders.

Entries go in rounds (``acknowledgements.plan_rounds``: a partition at most once per request),
each round one ShareAcknowledge per leader, concurrently; rounds one after the other. Each entry
gets its own result: None when applied, else its typed error (``INVALID_RECORD_STATE`` when the
member does not hold the records — never acquired by it, or its lock expired — and nothing of
that entry changed). An entry whose leader moved or could not be reached is sent once more after
the metadata cache caught up with etcd. Single event loop.
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
from yak_rest_proxy.consume.share.acknowledgements import AckRange, RoundEntry, plan_rounds
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
        for round_ in plan_rounds(entries):
            sendable = []
            for item in round_:
                if item.entry.topic in ids:
                    sendable.append(item)
                else:
                    topic = item.entry.topic
                    results[item.position] = UnknownTopicOrPartitionError(
                        f"topic {topic!r} does not exist", topic=topic
                    )
            outcome = await self._send(group, member, sendable, ids)
            moved = [item for item in sendable if leader_moved(outcome[item.position])]
            if moved:
                await self._lookup.sync()
                outcome.update(await self._send(group, member, moved, ids))
            for position, error in outcome.items():
                results[position] = error
        return results

    async def _send(
        self, group: str, member: str, items: list[RoundEntry], ids: dict[str, uuid.UUID]
    ) -> dict[int, YakError | None]:
        """One ShareAcknowledge per leader of ``items`` (one round), concurrently."""
        outcome: dict[int, YakError | None] = {}
        by_broker: dict[int, tuple[BrokerRegistration, list[RoundEntry]]] = {}
        snapshot = self._lookup.snapshot
        for item in items:
            try:
                broker = leader_of(snapshot, item.entry.topic, item.entry.partition)
            except YakError as exc:
                outcome[item.position] = exc
                continue
            by_broker.setdefault(broker.broker_id, (broker, []))[1].append(item)

        async def one(broker: BrokerRegistration, sent: list[RoundEntry]) -> None:
            request = ShareAcknowledgeRequest(
                group,
                member,
                tuple(
                    SharePartitionAcks(ids[i.entry.topic], i.entry.partition, (i.entry.batch,))
                    for i in sent
                ),
            )
            try:
                answered = await self._client_of(broker).share_acknowledge(request)
            except YakError as exc:
                outcome.update({i.position: exc for i in sent})
                return
            by_key = {(r.topic_id, r.partition): r for r in answered}
            for i in sent:
                result = by_key.get((ids[i.entry.topic], i.entry.partition))
                if result is None:
                    outcome[i.position] = UnknownServerError(
                        f"broker {broker.broker_id} did not answer for "
                        f"{i.entry.topic}-{i.entry.partition}"
                    )
                else:
                    outcome[i.position] = None if result.error is None else result.error.exception()

        await asyncio.gather(*(one(broker, sent) for broker, sent in by_broker.values()))
        return outcome
