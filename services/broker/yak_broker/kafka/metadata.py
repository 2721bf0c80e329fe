"""Metadata (api key 3, v1-v12): brokers, topics and partition leadership, from the broker's
metadata cache (``Broker.snapshot``: etcd as of the cache's last revision).

- **Brokers**: every live broker with a Kafka listener (``BrokerRegistration.kafka_port``), at
  its advertised Kafka address, with its rack. A broker without one is left out, and so are
  partitions' references to it as leader (``LEADER_NOT_AVAILABLE``: a client must never be
  told to connect to a broker it cannot reach).
- **Controller id**: the lowest id among those brokers. Yak's controller is the coordinator
  service, which speaks no Kafka; clients only use the controller id as the broker to send
  admin requests to, and any broker can forward those (a later increment), so the answer only
  needs to be a live Kafka broker that every broker names alike — the lowest id is both.
  -1 when no broker has a Kafka listener.
- **Topics**: by name (v10+: or by topic id), all of them for a null list, none for an empty
  one; an unknown one gets ``UNKNOWN_TOPIC_OR_PARTITION`` (topics are never auto-created, so
  ``allow_auto_topic_creation`` changes nothing); a topic being deleted is unknown. Internal
  topics (``__yak_*``) are flagged internal. Topic ids are the topics' own (``TopicRecord.
  topic_id``: Kafka's URL-safe base64 of a UUID, or hex; ``topic_uuid``).
- **Read your writes across brokers**: a topic the answer would name that the cache lacks, or
  holds without all its partition states (the controller writes the record, then the states,
  in two revisions), is caught up on first (``Broker.caught_up``: the topic's keys read from
  etcd, the watch waited for, at most 2 s; nothing newer in etcd: no wait), so a topic made
  through one broker's CreateTopics is described whole by any other. A topic whose partition
  states are still not there answers ``LEADER_NOT_AVAILABLE`` (retriable), never a topic of no
  partitions.
- **Partitions**: leader, leader epoch, replicas, ISR, and the replicas whose broker is not
  registered as offline replicas; a partition without a live leader has
  ``LEADER_NOT_AVAILABLE`` and leader -1.

**Authorization** (``kafka.authorize``), as Kafka's and the REST topic listing: all topics
lists only those the principal may DESCRIBE; a named topic it may not describe gets
``TOPIC_AUTHORIZATION_FAILED`` whether or not it exists (by topic id: the answer names no
topic), so a listing never tells which topics exist. Brokers are listed to every
authenticated principal. Authorized-operations fields keep Kafka's "not asked" value.
Single event loop.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import uuid
from typing import Any

from yak.errors import InvalidTopicError
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import BrokerRegistration, PartitionState, TopicRecord
from yak.metadata.snapshot import ClusterSnapshot
from yak.names import validate_topic_name
from yak.protocol.broker_wire import Buffer
from yak.security.acl import Operation, ResourceType
from yak_broker.kafka.authorize import TOPIC_AUTHORIZATION_FAILED, authorized, visible
from yak_broker.kafka.context import KafkaRequest
from yak_broker.kafka.schemas import read_request, write_response

__all__ = ["handle_metadata", "kafka_brokers", "kafka_endpoint", "topic_uuid"]

API_METADATA = 3
_NONE = 0
_UNKNOWN_TOPIC_OR_PARTITION = 3
_LEADER_NOT_AVAILABLE = 5
_INTERNAL_PREFIX = "__yak_"
_ZERO_UUID = uuid.UUID(int=0)
_CATCH_UP_MAX = 64
_DESCRIBE = Operation.DESCRIBE


def kafka_endpoint(registration: BrokerRegistration) -> tuple[str, int] | None:
    """Where Kafka clients reach a broker, or None if it has no Kafka listener."""
    if registration.kafka_port is None:
        return None
    return registration.kafka_host or registration.host, registration.kafka_port


def kafka_brokers(snapshot: ClusterSnapshot) -> dict[int, tuple[str, int]]:
    """The live brokers with a Kafka listener, by id, in id order."""
    found = {}
    for broker_id in sorted(snapshot.brokers):
        endpoint = kafka_endpoint(snapshot.brokers[broker_id])
        if endpoint is not None:
            found[broker_id] = endpoint
    return found


async def handle_metadata(request: KafkaRequest) -> list[Buffer]:
    version = request.api_version
    parsed = read_request(API_METADATA, version, request.body)
    broker = request.server.broker
    snapshot = broker.snapshot()
    names = None if parsed.topics is None else [t.name for t in parsed.topics]
    lacking = _lacking(snapshot, names)
    if lacking:
        keys = (k for name in lacking for k in _topic_keys(broker.keyspace, name))
        snapshot = await broker.caught_up(*keys)
    brokers = kafka_brokers(snapshot)
    if parsed.topics is None:
        listed = [name for name, record in sorted(snapshot.topics.items()) if not record.deleting]
        wanted: list[tuple[str | None, uuid.UUID | None]] = [
            (name, None) for name in visible(request, _DESCRIBE, ResourceType.TOPIC, listed)
        ]
    else:
        wanted = [(t.name, getattr(t, "topic_id", None)) for t in parsed.topics]
    by_id = _topics_by_id(snapshot) if any(name is None for name, _ in wanted) else {}
    topics = [_topic(snapshot, brokers, name, topic_id, by_id) for name, topic_id in wanted]
    if parsed.topics is not None:
        named = (t["name"] for t in topics if t["name"] is not None)
        described = authorized(request, _DESCRIBE, ResourceType.TOPIC, named)
        topics = [
            t if t["name"] is None or t["name"] in described else _denied(t, by_name=name)
            for t, (name, _) in zip(topics, wanted, strict=True)
        ]
    values: dict[str, Any] = {
        "throttle_time": 0,
        "brokers": [
            {"node_id": b, "host": host, "port": port, "rack": snapshot.brokers[b].rack}
            for b, (host, port) in brokers.items()
        ],
        "cluster_id": request.server.broker.settings.cluster_id,
        "controller_id": min(brokers, default=-1),
        "topics": topics,
    }
    return write_response(API_METADATA, version, request.correlation_id, values)


def _lacking(snapshot: ClusterSnapshot, names: list[str | None] | None) -> list[str]:
    """The topics the answer would name that the cache lacks, or holds without all their
    partition states (the controller writes a topic's record, then its partitions, in two
    revisions): every listed one for a null list, else the named ones with legal names; at
    most ``_CATCH_UP_MAX`` of them (a request naming thousands of unknown topics is answered
    from the cache as it is)."""
    if names is None:
        candidates = [n for n, r in sorted(snapshot.topics.items()) if not r.deleting]
    else:
        candidates = [n for n in names if n is not None and _legal(n)]
    lacking = [n for n in candidates if not _complete(snapshot, n)]
    return lacking if len(lacking) <= _CATCH_UP_MAX else []


def _complete(snapshot: ClusterSnapshot, name: str) -> bool:
    record = snapshot.topics.get(name)
    return record is not None and len(snapshot.partitions_of(name)) >= record.partitions


def _legal(name: str) -> bool:
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return False
    return True


def _topic_keys(keyspace: Keyspace, name: str) -> tuple[str, str]:
    return keyspace.topic(name), keyspace.topic_partitions_prefix(name)


def _denied(topic: dict[str, Any], *, by_name: str | None) -> dict[str, Any]:
    return {
        "error_code": TOPIC_AUTHORIZATION_FAILED,
        "name": by_name,
        "topic_id": _ZERO_UUID if by_name is not None else topic["topic_id"],
        "is_internal": False,
        "partitions": [],
    }


def _topics_by_id(snapshot: ClusterSnapshot) -> dict[uuid.UUID, str]:
    return {topic_uuid(r): name for name, r in snapshot.topics.items() if not r.deleting}


def topic_uuid(record: TopicRecord) -> uuid.UUID:
    """A topic's id as Kafka's 16 bytes: the coordinator's ids are Kafka's own format (URL-safe
    base64 of a UUID, as Kafka's tools print them), older ones hex; anything else is hashed."""
    topic_id = record.topic_id
    with contextlib.suppress(ValueError):
        return uuid.UUID(hex=topic_id)
    with contextlib.suppress(ValueError, binascii.Error):
        raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
        if len(raw) == 16:
            return uuid.UUID(bytes=raw)
    # a topic id is opaque to Yak, Kafka wants 16 bytes
    return uuid.uuid5(uuid.NAMESPACE_URL, topic_id)


def _topic(
    snapshot: ClusterSnapshot,
    brokers: dict[int, tuple[str, int]],
    name: str | None,
    topic_id: uuid.UUID | None,
    by_id: dict[uuid.UUID, str],
) -> dict[str, Any]:
    if name is None and topic_id is not None:
        name = by_id.get(topic_id)
    record = snapshot.topics.get(name) if name is not None else None
    if record is None or record.deleting:
        return {
            "error_code": _UNKNOWN_TOPIC_OR_PARTITION,
            "name": name,
            "topic_id": topic_id or _ZERO_UUID,
            "is_internal": False,
            "partitions": [],
        }
    states = snapshot.partitions_of(record.name)
    waiting = not states and record.partitions > 0  # its partitions not written (or seen) yet
    return {
        "error_code": _LEADER_NOT_AVAILABLE if waiting else _NONE,
        "name": record.name,
        "topic_id": topic_uuid(record),
        "is_internal": record.name.startswith(_INTERNAL_PREFIX),
        "partitions": [_partition(state, brokers, snapshot) for state in states],
    }


def _partition(
    state: PartitionState, brokers: dict[int, tuple[str, int]], snapshot: ClusterSnapshot
) -> dict[str, Any]:
    led = state.has_leader and state.leader in brokers
    return {
        "error_code": _NONE if led else _LEADER_NOT_AVAILABLE,
        "partition_index": state.partition,
        "leader_id": state.leader if led else -1,
        "leader_epoch": state.leader_epoch,
        "replica_nodes": list(state.replicas),
        "isr_nodes": list(state.isr),
        "offline_replicas": [r for r in state.replicas if r not in snapshot.brokers],
    }
