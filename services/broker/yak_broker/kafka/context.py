"""What a Kafka API handler is given, and what it returns.

A handler is ``async (KafkaRequest) -> list[Buffer] | None``: the request's header fields, its
body (the bytes after the header, a read-only view of the frame) and the ``KafkaServer`` it is
served by; it returns the whole response frame as parts to write in order, or None when the
request gets no answer (a Produce with acks=0). It raises ``InvalidRequestError`` for a body it
cannot parse (the listener closes the connection: the client sent something Kafka would
refuse the same way); per-partition failures travel inside its response. The request names
the connection's principal (``KafkaRequest.principal``, from its SASL session); a handler
checks it with ``kafka.authorize`` before it acts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from yak.clients.admin import AdminClient
from yak.protocol.broker_wire import Buffer
from yak_broker.kafka.consumer_fetch_sessions import ConsumerFetchSessions, register_metrics
from yak_broker.kafka.groups.coordinator import GroupCoordinator
from yak_broker.kafka.sasl_session import ANONYMOUS

if TYPE_CHECKING:
    from yak.metadata.producer_ids import ProducerIds
    from yak_broker.kafka.controller_admin import OpenAdmin
    from yak_broker.kafka.quotas import KafkaQuotas
    from yak_broker.kafka.sasl_session import SaslSession
    from yak_broker.kafka.security import KafkaSecurity
    from yak_broker.server.broker import Broker

__all__ = ["ANONYMOUS", "Handler", "KafkaRequest", "KafkaServer"]


@dataclass(frozen=True, slots=True)
class KafkaServer:
    """One broker's Kafka listener as its handlers see it."""

    broker: Broker
    #: Producer ids for InitProducerId (blocks reserved in the metadata store).
    producer_ids: ProducerIds
    #: Opens a client of the controller's admin API (the admin APIs; ``kafka.controller``).
    open_admin: OpenAdmin = AdminClient
    #: The classic groups this broker coordinates (``kafka/groups``), built from ``broker``.
    groups: GroupCoordinator = field(init=False)
    #: Users and ACLs (``kafka.security``); None: the listener does not authenticate
    #: (PLAINTEXT/SSL) and every check passes (``kafka.authorize``).
    security: KafkaSecurity | None = None
    #: Per-principal byte-rate quotas of Produce and Fetch (``kafka.quotas``); None: none.
    quotas: KafkaQuotas | None = None
    #: Consumers' incremental fetch sessions (``kafka.consumer_fetch_sessions``), at most
    #: the broker's ``kafka_fetch_session_cache_slots``; they die with the broker.
    fetch_sessions: ConsumerFetchSessions = field(init=False)

    def __post_init__(self) -> None:
        broker = self.broker
        object.__setattr__(self, "groups", GroupCoordinator.of_broker(broker))
        sessions = ConsumerFetchSessions(
            broker.replicas.waiters,
            max_sessions=broker.settings.kafka_fetch_session_cache_slots,
        )
        register_metrics(broker.metrics.registry, sessions)
        object.__setattr__(self, "fetch_sessions", sessions)


class KafkaRequest(NamedTuple):
    server: KafkaServer
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: memoryview
    #: The connection's authentication (``kafka.sasl``); None: the listener has none.
    session: SaslSession | None = None

    @property
    def principal(self) -> str:
        """The connection's principal (``User:ANONYMOUS`` before or without SASL)."""
        return ANONYMOUS if self.session is None else self.session.principal


Handler = Callable[[KafkaRequest], Awaitable[list[Buffer] | None]]
