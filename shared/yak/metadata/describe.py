"""The admin APIs' wire forms of cluster metadata: what a server answers for a partition, a
topic and a broker, built from what etcd holds.

The API models (``yak.api.admin``) are the client's, and import nothing of the server; the
coordinator and the rest-proxy, which both describe topics and list brokers, build them here from
the metadata models and a ``ClusterSnapshot``. Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence

from yak.api.admin import (
    BrokerInfo,
    BrokerLoadInfo,
    BrokerStatus,
    PartitionInfo,
    TopicDescription,
)
from yak.metadata.models import BrokerLoad, BrokerRegistration, PartitionState, TopicRecord
from yak.metadata.snapshot import ClusterSnapshot

__all__ = [
    "broker_info",
    "broker_listing",
    "broker_load_info",
    "partition_info",
    "topic_description",
]


def partition_info(state: PartitionState) -> PartitionInfo:
    """The wire form of a partition's state in etcd."""
    return PartitionInfo(
        partition=state.partition,
        leader=state.leader,
        leader_epoch=state.leader_epoch,
        partition_epoch=state.partition_epoch,
        replicas=list(state.replicas),
        isr=list(state.isr),
        adding_replicas=list(state.adding_replicas),
        removing_replicas=list(state.removing_replicas),
    )


def topic_description(record: TopicRecord, states: Sequence[PartitionState]) -> TopicDescription:
    """The wire form of a topic record and its partitions' states."""
    return TopicDescription(
        name=record.name,
        topic_id=record.topic_id,
        partition_count=record.partitions,
        replication_factor=record.replication_factor,
        configs=dict(record.configs),
        deleting=record.deleting,
        partitions=[partition_info(state) for state in states],
    )


def broker_load_info(load: BrokerLoad, now_ms: int) -> BrokerLoadInfo:
    """The wire form of a registration's load sample, judged at ``now_ms``."""
    return BrokerLoadInfo(
        cpu=load.cpu,
        memory_bytes=load.memory_bytes,
        disk_used_ratio=load.disk_used_ratio,
        records_per_second=load.records_per_second,
        sampled_at_ms=load.sampled_at_ms,
        publish_interval_ms=load.publish_interval_ms,
        stale=load.stale(now_ms),
    )


def broker_listing(snapshot: ClusterSnapshot, now_ms: int) -> list[BrokerInfo]:
    """Every broker of ``snapshot``, registered or recorded, by id, as the admin APIs list
    them (``now_ms``: the last-seen time of registered ones)."""
    ids = sorted({*snapshot.brokers, *snapshot.broker_records})
    listed = (broker_info(snapshot, broker_id, now_ms) for broker_id in ids)
    return [info for info in listed if info is not None]


def _kafka_address(registration: BrokerRegistration) -> str | None:
    """``host:port`` of a broker's Kafka listener (None: it has none open)."""
    if registration.kafka_port is None:
        return None
    return f"{registration.kafka_host or registration.host}:{registration.kafka_port}"


def broker_info(snapshot: ClusterSnapshot, broker_id: int, now_ms: int) -> BrokerInfo | None:
    """One broker of ``snapshot`` (None: neither registered nor recorded)."""
    registration = snapshot.brokers.get(broker_id)
    record = snapshot.broker_records.get(broker_id)
    decommissioning = broker_id in snapshot.decommissions
    first = record.first_registered_ms if record is not None else None
    if registration is not None:
        return BrokerInfo(
            broker_id=broker_id,
            host=registration.host,
            port=registration.port,
            rack=registration.rack,
            status=BrokerStatus.SHUTTING_DOWN if registration.shutting_down else BrokerStatus.UP,
            shutting_down=registration.shutting_down,
            decommissioning=decommissioning,
            last_seen_ms=now_ms,
            first_registered_ms=first if first is not None else registration.started_at_ms,
            started_at_ms=registration.started_at_ms,
            load=None if registration.load is None else broker_load_info(registration.load, now_ms),
            kafka=_kafka_address(registration),
        )
    if record is None:
        return None
    return BrokerInfo(
        broker_id=broker_id,
        host=record.host,
        port=record.port,
        rack=record.rack,
        status=BrokerStatus.DOWN,
        decommissioning=decommissioning,
        last_seen_ms=None if record.registered else record.last_seen_ms,
        first_registered_ms=first,
        started_at_ms=record.started_at_ms,
    )
