"""How ``TopicShareStateStore`` reaches the leaders of ``__yak_share_state``'s partitions.

``StateTopicClient`` is the narrow interface the store uses — produce, fetch, and the
OffsetsForLeaderEpoch question a new leader's readers ask — which ``yak.clients.broker.
BrokerClient`` provides (produce and fetch on the internal listener, Kafka framing; the epoch
question on HTTP). ``StateTopicClients`` hands out one per leader registration;
``BrokerClients`` is the broker's: one ``BrokerClient`` per broker id, opened on first use like
the replica fetchers' (``registration.url`` plus ``data_port``), replaced when that broker
re-registers at another address, all closed by ``aclose``. Unit tests pass an in-memory twin.

Single event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from yak.clients.broker import BrokerClient
from yak.metadata.models import BrokerRegistration
from yak.protocol.broker_models import EpochEndOffset, OffsetForLeaderEpoch
from yak.protocol.broker_wire import FetchedPartition, FetchRequest, ProducePartition, ProduceResult

__all__ = ["BrokerClients", "StateTopicClient", "StateTopicClients"]


class StateTopicClient(Protocol):
    """One leader broker, as the state store talks to it."""

    async def produce(
        self, partitions: Sequence[ProducePartition], *, acks: int = 1, timeout_ms: int = 30_000
    ) -> tuple[ProduceResult, ...]: ...

    async def fetch(self, request: FetchRequest) -> tuple[FetchedPartition, ...]: ...

    async def offsets_for_leader_epoch(
        self, partitions: Sequence[OffsetForLeaderEpoch], *, replica_id: int = -1
    ) -> list[EpochEndOffset]: ...


class StateTopicClients(Protocol):
    """A client per leader; closed once, with the store."""

    def client(self, leader: BrokerRegistration) -> StateTopicClient: ...

    async def aclose(self) -> None: ...


class BrokerClients:
    """One ``BrokerClient`` per broker id (see the module docstring)."""

    def __init__(self, *, timeout_s: float = 30.0) -> None:
        self._timeout_s = timeout_s
        self._clients: dict[int, tuple[str, BrokerClient]] = {}
        self._retired: list[BrokerClient] = []

    def client(self, leader: BrokerRegistration) -> StateTopicClient:
        address = f"{leader.url}#{leader.data_port}"
        known = self._clients.get(leader.broker_id)
        if known is not None and known[0] == address:
            return known[1]
        if known is not None:
            # Another process at another address: requests may still be in flight on the
            # old client, so it is closed with the rest, not now.
            self._retired.append(known[1])
        client = BrokerClient(leader.url, timeout_s=self._timeout_s, data_port=leader.data_port)
        self._clients[leader.broker_id] = (address, client)
        return client

    async def aclose(self) -> None:
        clients = [c for _, c in self._clients.values()] + self._retired
        self._clients.clear()
        self._retired.clear()
        for client in clients:
            await client.aclose()
