"""``BrokerHarness``: a running in-process broker and helpers that stand in for the coordinator.

The harness writes ``TopicRecord`` and ``PartitionState`` keys into the (in-memory) metadata
store itself, as the coordinator would, then waits until the broker hosts the partitions.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from yak.clients.broker import BrokerClient
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerRegistration, PartitionState, TopicRecord
from yak.protocol.broker_wire import FetchPartition, FetchRequest
from yak_broker.server.broker import Broker

__all__ = ["BrokerHarness", "session_round"]


@dataclass
class BrokerHarness:
    """A running in-process broker (id 0) and what a test needs around it."""

    store: MemoryMetadataStore
    keyspace: Keyspace
    broker: Broker
    client: BrokerClient
    http: httpx.AsyncClient
    #: The app as an in-process HTTP transport (for more clients of the same broker).
    transport: httpx.AsyncBaseTransport | None = None

    async def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        leader: int = 0,
        replicas: Sequence[int] = (0,),
        isr: Sequence[int] | None = None,
        configs: dict[str, str] | None = None,
        leader_epoch: int = 0,
    ) -> str:
        """Write the topic's keys as the coordinator would, and wait until the broker hosts it."""
        topic_id = uuid.uuid4().hex
        record = TopicRecord(
            name=name,
            topic_id=topic_id,
            partitions=partitions,
            replication_factor=len(replicas),
            configs=configs or {},
            created_at_ms=0,
        )
        await self.store.put(self.keyspace.topic(name), record.encode())
        for p in range(partitions):
            await self.set_partition(
                name, p, leader=leader, replicas=replicas, isr=isr, leader_epoch=leader_epoch
            )
        return topic_id

    async def set_partition(
        self,
        topic: str,
        partition: int,
        *,
        leader: int = 0,
        replicas: Sequence[int] = (0,),
        isr: Sequence[int] | None = None,
        leader_epoch: int = 0,
    ) -> None:
        state = PartitionState(
            topic=topic,
            partition=partition,
            leader=leader,
            leader_epoch=leader_epoch,
            replicas=tuple(replicas),
            isr=tuple(replicas if isr is None else isr),
        )
        revision = await self.store.put(self.keyspace.partition(topic, partition), state.encode())
        await self.sync(revision)

    async def register_peer(self, broker_id: int, log_dir_id: str = "") -> None:
        """Register another broker (a follower must be registered to join an ISR: KIP-903)."""
        registration = BrokerRegistration(
            broker_id=broker_id,
            host="127.0.0.1",
            port=1,
            started_at_ms=0,
            log_dir_id=log_dir_id,
        )
        revision = await self.store.put(self.keyspace.broker(broker_id), registration.encode())
        await self.sync(revision)

    async def sync(self, revision: int) -> None:
        """Wait until the broker's cache reflects ``revision``, then apply it (idempotent)."""
        cache = self.broker._cache
        assert cache is not None
        await cache.wait_for_revision(revision, timeout_s=5)
        await self.broker.replicas.apply(self.broker.snapshot())


def session_round(
    topic: str,
    positions: dict[int, int],
    session_id: int,
    epoch: int,
    *,
    replica_id: int,
    max_wait_ms: int = 100,
    forgotten: tuple[tuple[str, int], ...] = (),
) -> FetchRequest:
    """A follower's fetch of ``topic``'s partitions from their offsets in ``positions``, in
    fetch session ``session_id`` at ``epoch`` (0, 0: open one)."""
    return FetchRequest(
        tuple(FetchPartition(topic, p, offset, 1 << 20, 0) for p, offset in positions.items()),
        max_wait_ms=max_wait_ms,
        replica_id=replica_id,
        session_id=session_id,
        session_epoch=epoch,
        forgotten=forgotten,
    )
