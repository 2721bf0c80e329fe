"""``RidingAcks``: one acquire's acknowledgements, carried by its ShareFetches (KIP-932's way).

An acquire may bring the member's answers to records it holds. Each partition's entries ride
that partition's ShareFetch (``AckBatch`` es in ``SharePartitionAcks.acks``, in the order given):
the leader applies them, then acquires, in one request and one state write, and lists the
refused ones (``acknowledgements.entry_results``). Entries whose leader is unknown, or whose
broker already has a fetch of this member in flight (a parked fetch the acquire takes over: one
fetch per member and broker), go on their own (``Acknowledger``). An entry whose fetch found the
leader moved, or could not reach it, is sent again through the ``Acknowledger`` (which retries
once after the metadata caught up). Partitions named only by entries are added to the acquire
(only those partitions, not their whole topics), so a member may acquire from them too.

Each entry ends with one result, in the order given: None when applied, else its typed error;
nothing of a refused entry changed. The results are complete once ``results`` returns: every
fetch that carried entries has answered (they are sent with no long poll, so they answer at
once) and every entry sent apart has its answer. Single event loop.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Sequence

from yak.errors import NetworkError, UnknownTopicOrPartitionError, YakError
from yak.security.acl import Operation, ResourceType
from yak_rest_proxy.consume.share.acknowledgements import (
    AckRange,
    RoundEntry,
    by_partition,
    entry_results,
)
from yak_rest_proxy.consume.share.acknowledger import Acknowledger
from yak_rest_proxy.consume.share.share_metadata import ShareLookup, leader_moved, topic_uuid
from yak_rest_proxy.security.access import require

__all__ = ["Outcomes", "RidingAcks"]

#: A fetch's outcome for the entries it carried, by partition: the partition's acknowledgement
#: error (None: all applied) and the indices of its refused entries.
Outcomes = dict[tuple[str, int], tuple[YakError | None, tuple[int, ...]]]
_Partition = tuple[str, int]


class RidingAcks:
    """One acquire's acknowledgement entries (see the module docstring)."""

    def __init__(self, acknowledger: Acknowledger, group: str, member: str) -> None:
        self._acknowledger = acknowledger
        self._group = group
        self._member = member
        self._results: list[YakError | None] = []
        self._riders: dict[_Partition, list[RoundEntry]] = {}
        self._apart: list[asyncio.Future[tuple[list[RoundEntry], list[YakError | None]]]] = []
        self.ids: dict[str, uuid.UUID] = {}

    @property
    def partitions(self) -> list[_Partition]:
        """The partitions whose entries ride a fetch, in the order of their first entries."""
        return list(self._riders)

    async def prepare(self, lookup: ShareLookup, entries: Sequence[AckRange]) -> None:
        """READ on the entries' topics; entries of unknown topics answered at once."""
        self._results = [None] * len(entries)
        if not entries:
            return
        names = {entry.topic for entry in entries}
        require(ResourceType.TOPIC, names, Operation.READ)
        snapshot = await lookup.snapshot_of(names)
        for name in names:
            record = snapshot.topics.get(name)
            topic_id = None if record is None or record.deleting else topic_uuid(record.topic_id)
            if topic_id is not None:
                self.ids[name] = topic_id
        for position, entry in enumerate(entries):
            if entry.topic not in self.ids:
                self._results[position] = UnknownTopicOrPartitionError(
                    f"topic {entry.topic!r} does not exist", topic=entry.topic
                )
        known = [RoundEntry(i, e) for i, e in enumerate(entries) if e.topic in self.ids]
        self._riders = by_partition(known)

    def riding(self, parts: Iterable[_Partition]) -> dict[_Partition, list[AckRange]]:
        """The entries a fetch of ``parts`` carries, by partition."""
        return {
            key: [item.entry for item in self._riders[key]] for key in parts if key in self._riders
        }

    def send_apart(self, parts: Iterable[_Partition]) -> None:
        """The riders of ``parts`` go on their own (concurrently with the fetches)."""
        items = [item for key in parts if key in self._riders for item in self._riders[key]]
        if items:
            self._apart.append(asyncio.ensure_future(self._send(items)))

    async def results(
        self, carried: Sequence[tuple[Iterable[_Partition], Outcomes | None]]
    ) -> list[YakError | None]:
        """Every entry's result, given what the fetches that carried riders answered (None: no
        answer came, ``NetworkError``), once the entries sent apart have theirs."""
        again: list[RoundEntry] = []
        unanswered = NetworkError("the leader's answer did not come")
        for parts, outcome in carried:
            got: Outcomes = outcome if outcome is not None else {}
            for key in parts:
                items = self._riders[key]
                error, refused = got.get(key, (unanswered, ()))
                if leader_moved(error):
                    again.extend(items)
                else:
                    for position, result in entry_results(items, error, refused).items():
                        self._results[position] = result
        if again:
            await self._settle(again)
        for sent in await asyncio.gather(*self._apart):
            self._record(*sent)
        return self._results

    async def _send(
        self, items: list[RoundEntry]
    ) -> tuple[list[RoundEntry], list[YakError | None]]:
        errors = await self._acknowledger.acknowledge(
            self._group, self._member, [item.entry for item in items]
        )
        return items, errors

    async def _settle(self, items: list[RoundEntry]) -> None:
        self._record(*await self._send(items))

    def _record(self, items: list[RoundEntry], errors: list[YakError | None]) -> None:
        for item, error in zip(items, errors, strict=True):
            self._results[item.position] = error
