"""Which broker coordinates a group: rendezvous (highest random weight) hashing over the live
brokers that advertise a Kafka listener (docs/decisions.md, "Kafka classic groups").

The winner of ``group`` is the broker with the highest ``murmur2(group \\0 broker_id)`` (ties,
never expected, go to the lower id). Every broker computes the same answer from the same
``brokers/`` prefix with no write; a broker joining or leaving moves only the groups it wins or
held. Pure: a function of the cluster snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping

from yak.metadata.models import BrokerRegistration
from yak.partitioner import murmur2

__all__ = ["coordinator_of", "kafka_brokers"]


def kafka_brokers(brokers: Mapping[int, BrokerRegistration]) -> dict[int, BrokerRegistration]:
    """The registered brokers with a Kafka listener."""
    return {b: r for b, r in brokers.items() if r.kafka_port is not None}


def coordinator_of(group: str, brokers: Mapping[int, BrokerRegistration]) -> int | None:
    """The id of the broker coordinating ``group`` (None: no broker has a Kafka listener)."""
    best: tuple[int, int] | None = None
    for broker_id in kafka_brokers(brokers):
        weight = murmur2(f"{group}\0{broker_id}".encode())
        if best is None or (weight, -broker_id) > (best[0], -best[1]):
            best = (weight, broker_id)
    return None if best is None else best[1]
