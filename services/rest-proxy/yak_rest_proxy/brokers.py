"""``BrokerPool``: one ``BrokerClient`` per live broker, found through the metadata cache.

A client is made on first use and kept while the broker's URL and internal listener port stay
the same (a broker that restarts on other ports gets a new client; the old one is closed).
Produce and fetch go to the broker's internal listener (Kafka framing, one pipelined
connection per client) when it registered one, else over HTTP. Leader lookups raise the
typed errors a producer or reader retries on: ``UnknownTopicOrPartitionError`` for a partition
the metadata does not know, ``LeaderNotAvailableError`` while it has no live leader.
Single event loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from yak.clients.broker import BrokerClient
from yak.errors import LeaderNotAvailableError, UnknownTopicOrPartitionError
from yak.metadata.cache import ClusterSnapshot, MetadataCache
from yak.metadata.models import BrokerRegistration

__all__ = ["BrokerPool", "leader_of"]

#: Connections per broker: produce requests (one in flight per partition and acks) and
#: long-polling fetches (one per waiting consumer poll).
_PRODUCE_CONNECTIONS = 64
_FETCH_CONNECTIONS = 512
_Factory = Callable[[BrokerRegistration], BrokerClient]


def leader_of(snapshot: ClusterSnapshot, topic: str, partition: int) -> BrokerRegistration:
    """The live leader of a partition, or the typed error why there is none."""
    record = snapshot.topics.get(topic)
    if record is None or record.deleting:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist", topic=topic)
    state = snapshot.partitions.get((topic, partition))
    if state is None:
        if 0 <= partition < record.partitions:
            raise LeaderNotAvailableError(
                f"{topic}-{partition} is not created yet", topic=topic, partition=partition
            )
        raise UnknownTopicOrPartitionError(
            f"topic {topic!r} has no partition {partition} (it has {record.partitions})",
            topic=topic,
            partition=partition,
        )
    broker = snapshot.brokers.get(state.leader) if state.has_leader else None
    if broker is None:
        raise LeaderNotAvailableError(
            f"{topic}-{partition} has no live leader", topic=topic, partition=partition
        )
    return broker


def _factory(
    custom: Callable[[str], BrokerClient] | None, timeout_s: float, connections: int
) -> _Factory:
    """How the pool makes a broker's client: ``custom`` (tests) from the URL, else a client
    of the broker's internal listener (its HTTP pool of ``connections`` for the rest)."""
    if custom is not None:
        return lambda broker: custom(broker.url)
    return lambda broker: BrokerClient(
        broker.url, timeout_s=timeout_s, max_connections=connections, data_port=broker.data_port
    )


class BrokerPool:
    """Clients of the brokers named in the cluster metadata."""

    def __init__(
        self,
        cache: MetadataCache,
        *,
        timeout_s: float = 30.0,
        client_factory: Callable[[str], BrokerClient] | None = None,
    ) -> None:
        self._cache = cache
        self._factory = _factory(client_factory, timeout_s, _PRODUCE_CONNECTIONS)
        self._fetch_factory = _factory(client_factory, timeout_s, _FETCH_CONNECTIONS)
        self._fetch_clients: dict[int, BrokerClient] = {}
        self._clients: dict[int, BrokerClient] = {}
        #: Clients of brokers that moved, closed with the pool (a request may still use one).
        self._closing: list[BrokerClient] = []

    def client(self, broker: BrokerRegistration) -> BrokerClient:
        """The client of ``broker`` for produce and short calls (made on first use, renewed
        if its URL changed)."""
        return self._get(self._clients, self._factory, broker)

    def fetch_client(self, broker: BrokerRegistration) -> BrokerClient:
        """The client of ``broker`` for long-polling fetches: a pool of its own, so parked
        fetches never make a produce wait for a connection."""
        return self._get(self._fetch_clients, self._fetch_factory, broker)

    def _get(
        self,
        clients: dict[int, BrokerClient],
        factory: _Factory,
        broker: BrokerRegistration,
    ) -> BrokerClient:
        client = clients.get(broker.broker_id)
        if (
            client is not None
            and client.base_url == broker.url.rstrip("/")
            and client.data_port in (broker.data_port, None)
        ):
            return client
        if client is not None:
            self._retire(client)
        client = factory(broker)
        clients[broker.broker_id] = client
        return client

    def leader(self, topic: str, partition: int) -> tuple[BrokerRegistration, BrokerClient]:
        """The leader of a partition and its client (see ``leader_of`` for the errors)."""
        broker = leader_of(self._cache.snapshot, topic, partition)
        return broker, self.client(broker)

    def _retire(self, client: BrokerClient) -> None:
        self._closing.append(client)

    async def aclose(self) -> None:
        clients = [*self._clients.values(), *self._fetch_clients.values(), *self._closing]
        self._clients.clear()
        self._fetch_clients.clear()
        self._closing = []
        for client in clients:
            with contextlib.suppress(Exception):
                await client.aclose()
