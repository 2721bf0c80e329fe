"""Scripted share brokers for the proxy's share-group tests, and the metadata they live in.

``ShareBrokers`` keeps, per partition, a log of records and a tiny share-partition: each offset
available, or acquired by a member with a delivery count, or done. A ShareFetch acquires the
available offsets of the partitions asked (at most ``max_records``) and answers their whole
batch; with nothing available it waits until ``wake`` is set or its max wait runs out — never a
sleep. ``hold[broker_id]`` (an ``asyncio.Event``) keeps a broker's fetches from answering until
set. ShareAcknowledge applies each partition's batches in order and answers
``INVALID_RECORD_STATE`` for batches whose offsets the member does not hold, listing them by
index (``refused``); a ShareFetch applies its partitions' batches so first (once, its
``ack_error`` and ``ack_refused`` the refusals) and acquires after. Every request is recorded
in ``requests``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from yak.clients.broker import BrokerClient
from yak.errors import InvalidRecordStateError, NotLeaderOrFollowerError
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import (
    BrokerRegistration,
    PartitionState,
    ShareGroupRecord,
    TopicRecord,
)
from yak.protocol.broker_wire import PartitionError
from yak.protocol.kafka_share import (
    AckResult,
    AckType,
    AcquiredRecords,
    ShareAcknowledgeRequest,
    ShareFetchedPartition,
    ShareFetchRequest,
    ShareFetchResponse,
    SharePartitionAcks,
)
from yak.record import RecordInput, encode_batch

__all__ = ["KS", "TOPIC_ID", "ShareBrokers", "share_cluster"]

KS = Keyspace("unit")
TOPIC_ID = uuid.UUID("00000000-0000-0000-0000-0000000000aa")
LOCK_MS = 30_000


class ShareBrokers:
    """Brokers 0 and 1 leading partitions 0 and 1 of topic ``t`` (see the module docstring)."""

    def __init__(self, records: dict[int, int] | None = None) -> None:
        counts = records if records is not None else {0: 3, 1: 3}
        self.logs = {p: [f"p{p}-{i}".encode() for i in range(n)] for p, n in counts.items()}
        #: (partition, offset) -> (member or None, delivery count, done)
        self.state: dict[tuple[int, int], tuple[str | None, int, bool]] = {
            (p, o): (None, 0, False) for p, log in self.logs.items() for o in range(len(log))
        }
        self.requests: list[tuple[int, ShareFetchRequest | ShareAcknowledgeRequest]] = []
        self.hold: dict[int, asyncio.Event] = {}
        self.wake = asyncio.Event()
        #: Partitions whose leader answers NOT_LEADER_OR_FOLLOWER once.
        self.not_leader_once: set[int] = set()
        #: Set by every acknowledgement.
        self.acked = asyncio.Event()
        self._clients: dict[str, BrokerClient] = {}

    def client(self, url: str) -> BrokerClient:
        """The (one) client of the broker at ``url``."""
        if url not in self._clients:
            self._clients[url] = _Client(url, self, int(url.rsplit(":", 1)[1]) - 9000)
        return self._clients[url]

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()

    def add(self, partition: int, value: bytes) -> None:
        log = self.logs[partition]
        self.state[(partition, len(log))] = (None, 0, False)
        log.append(value)
        self.wake.set()

    def held(self, member: str) -> list[tuple[int, int]]:
        return sorted(k for k, (m, _, done) in self.state.items() if m == member and not done)

    async def fetch(self, broker_id: int, request: ShareFetchRequest) -> ShareFetchResponse:
        self.requests.append((broker_id, request))
        if broker_id in self.hold:
            await self.hold[broker_id].wait()
        refused = {
            p.partition: self._apply(request.member_id, p)
            for p in request.partitions
            if p.acks and p.partition not in self.not_leader_once
        }
        if refused:
            self.acked.set()
        answer = [_with_acks(part, refused.get(part.partition)) for part in self._acquire(request)]
        idle = not any(p.acquired or p.error for p in answer)
        if idle and request.max_wait_ms:
            self.wake.clear()
            with suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), request.max_wait_ms / 1000)
            answer = [
                _with_acks(part, refused.get(part.partition)) for part in self._acquire(request)
            ]
        return ShareFetchResponse(tuple(answer), LOCK_MS)

    def _acquire(self, request: ShareFetchRequest) -> list[ShareFetchedPartition]:
        parts = []
        budget = request.max_records
        for asked in request.partitions:
            p = asked.partition
            if p in self.not_leader_once:
                self.not_leader_once.discard(p)
                error = PartitionError.of(NotLeaderOrFollowerError("moved"))
                parts.append(ShareFetchedPartition(asked.topic_id, p, error=error))
                continue
            free = [o for o in range(len(self.logs[p])) if self.state[(p, o)][0] is None]
            free = [o for o in free if not self.state[(p, o)][2]][:budget]
            budget -= len(free)
            acquired = []
            for offset in free:
                count = self.state[(p, offset)][1] + 1
                self.state[(p, offset)] = (request.member_id, count, False)
                acquired.append(AcquiredRecords(offset, offset, count))
            batch = encode_batch([RecordInput(value=v) for v in self.logs[p]], base_offset=0)
            parts.append(ShareFetchedPartition(asked.topic_id, p, batch, tuple(acquired)))
        return parts

    async def acknowledge(
        self, broker_id: int, request: ShareAcknowledgeRequest
    ) -> tuple[AckResult, ...]:
        self.requests.append((broker_id, request))
        self.acked.set()
        results = []
        for part in request.partitions:
            error, refused = self._apply(request.member_id, part)
            results.append(AckResult(part.topic_id, part.partition, error, refused=refused))
        return tuple(results)

    def _apply(self, member: str, part: SharePartitionAcks) -> _Refusal:
        """A partition's batches, one by one; the first refusal and the refused indices."""
        error, refused = None, []
        for index, batch in enumerate(part.acks):
            offsets = range(batch.first_offset, batch.last_offset + 1)
            keys = [(part.partition, o) for o in offsets]
            if any(self.state.get(k, (None, 0, True))[0] != member for k in keys):
                error = error or PartitionError.of(InvalidRecordStateError("not held"))
                refused.append(index)
                continue
            kind = AckType(batch.types[0])
            for key in keys:
                _, count, _ = self.state[key]
                if kind in (AckType.ACCEPT, AckType.REJECT):
                    self.state[key] = (None, count, True)
                elif kind is AckType.RELEASE:
                    self.state[key] = (None, count, False)
        return error, tuple(refused)


#: A partition's first acknowledgement refusal (None: all applied) and the refused indices.
_Refusal = tuple[PartitionError | None, tuple[int, ...]]


def _with_acks(part: ShareFetchedPartition, refusal: _Refusal | None) -> ShareFetchedPartition:
    if refusal is None:
        return part
    return part._replace(ack_error=refusal[0], ack_refused=refusal[1])


class _Client(BrokerClient):
    def __init__(self, url: str, brokers: ShareBrokers, broker_id: int) -> None:
        super().__init__(url)
        self._brokers = brokers
        self._id = broker_id

    async def share_fetch(self, request: ShareFetchRequest) -> ShareFetchResponse:
        return await self._brokers.fetch(self._id, request)

    async def share_acknowledge(self, request: ShareAcknowledgeRequest) -> tuple[AckResult, ...]:
        return await self._brokers.acknowledge(self._id, request)


@asynccontextmanager
async def share_cluster(
    *, group: bool = True, store: MemoryMetadataStore | None = None
) -> AsyncIterator[tuple[MemoryMetadataStore, MetadataCache]]:
    """A store holding brokers 0 and 1 (ports 9000, 9001), topic ``t`` (partition p led by
    broker p) and, with ``group``, share group ``g``; and a started cache of it."""
    store = store if store is not None else MemoryMetadataStore()
    for broker_id in (0, 1):
        registration = BrokerRegistration(
            broker_id=broker_id, host="127.0.0.1", port=9000 + broker_id, started_at_ms=0
        )
        await store.put(KS.broker(broker_id), registration.encode())
    topic = TopicRecord(
        name="t", topic_id=str(TOPIC_ID), partitions=2, replication_factor=1, created_at_ms=0
    )
    await store.put(KS.topic("t"), topic.encode())
    for partition in (0, 1):
        state = PartitionState(
            topic="t",
            partition=partition,
            leader=partition,
            replicas=(partition,),
            isr=(partition,),
        )
        await store.put(KS.partition("t", partition), state.encode())
    if group:
        await store.put(KS.share_group("g"), ShareGroupRecord(name="g", created_at_ms=0).encode())
    cache = MetadataCache(store, KS)
    await cache.start()
    try:
        yield store, cache
    finally:
        await cache.stop()
