"""CreateTopics (api key 19, v2-v7), DeleteTopics (20, v1-v6) and CreatePartitions (37, v0-v3),
through the controller (the coordinator's admin API, ``kafka.controller``).

Each topic is first checked here as the coordinator checks it — the name (``__yak_*`` is
Yak's: ``POLICY_VIOLATION``), the partition count, the replication factor against the live
brokers, the configs (``yak.topic_config``), an existing topic (``TOPIC_ALREADY_EXISTS``) —
so ``validate_only`` answers without a write and a bad topic costs no round trip. The write
itself is the coordinator's (which validates again, race-safe). A topic named twice in one
request is ``INVALID_REQUEST`` for each mention, as Kafka answers.

- CreateTopics: ``num_partitions`` -1 is Kafka's ``num.partitions`` default (1),
  ``replication_factor`` -1 the coordinator's default. Manual replica assignments are refused
  (``INVALID_REPLICA_ASSIGNMENT``): Yak places replicas itself. v5+ answers carry the topic's
  partition count, replication factor and configs (as DescribeConfigs lists them); v7 its id.
- DeleteTopics: by name, or (v6) by topic id (``UNKNOWN_TOPIC_ID`` for an id no topic has).
- CreatePartitions: the new total count; manual assignments refused likewise.

Waiting, as Kafka's controller does: with ``timeout_ms`` > 0 the answer waits until this
broker's metadata shows the result (every partition with a live leader; a deleted topic
gone); a result still not shown then is ``REQUEST_TIMED_OUT`` (the change itself is made).
ACLs, as Kafka's: CreateTopics needs CREATE on the cluster or on the topic, DeleteTopics DELETE
and CreatePartitions ALTER on the topic (``TOPIC_AUTHORIZATION_FAILED``, audited; a by-name
denial comes before the existence check, so it tells nothing); each change made is audited.
Topics of one request are handled concurrently. Single event loop.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from yak.api.admin import MAX_PARTITIONS
from yak.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    KafkaTimeoutError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    YakError,
)
from yak.metadata.snapshot import ClusterSnapshot
from yak.names import validate_topic_name
from yak.protocol.broker_wire import Buffer
from yak.security.acl import CLUSTER_NAME, Operation, ResourceType
from yak.topic_config import validate_min_insync_replicas, validate_topic_configs
from yak_broker.kafka.admin_configs import topic_config_entries
from yak_broker.kafka.authorize import visible
from yak_broker.kafka.context import KafkaRequest, KafkaServer
from yak_broker.kafka.controller import (
    await_metadata,
    controller_admin,
    failure,
    made,
    require,
)
from yak_broker.kafka.metadata import topic_uuid
from yak_broker.kafka.schemas import read_request, write_response

__all__ = ["handle_create_partitions", "handle_create_topics", "handle_delete_topics"]

API_CREATE_TOPICS = 19
API_DELETE_TOPICS = 20
API_CREATE_PARTITIONS = 37
DEFAULT_PARTITIONS = 1
_INTERNAL_PREFIX = "__yak_"
_UNKNOWN_TOPIC_ID = 100
_ZERO_UUID = uuid.UUID(int=0)
_TOPIC = ResourceType.TOPIC


class UnknownTopicIdError(UnknownTopicOrPartitionError):
    """A DeleteTopics v6 topic id no topic has (Kafka's ``UNKNOWN_TOPIC_ID``)."""

    kafka_code = _UNKNOWN_TOPIC_ID


def _timeout_ms(parsed: Any) -> int:
    timeout = parsed.timeout
    if isinstance(timeout, datetime.timedelta):
        return int(timeout.total_seconds() * 1000)
    return int(timeout)


def _duplicates(names: Sequence[str | None]) -> set[str]:
    return {n for n in names if n is not None and names.count(n) > 1}


def _user_topic(name: str) -> str:
    validate_topic_name(name)
    if name.startswith(_INTERNAL_PREFIX):
        raise PolicyViolationError(
            f"topic names starting with {_INTERNAL_PREFIX!r} are reserved for Yak", topic=name
        )
    return name


def _led(name: str, count: int) -> Callable[[ClusterSnapshot], bool]:
    """Whether the topic's ``count`` partitions all have a live leader (or the topic is gone)."""

    def ready(snapshot: ClusterSnapshot) -> bool:
        if name not in snapshot.topics:
            return True
        states = snapshot.partitions_of(name)
        return len(states) >= count and all(
            s.has_leader and s.leader in snapshot.brokers for s in states
        )

    return ready


async def _settled(
    server: KafkaServer, ready: Callable[[ClusterSnapshot], bool], timeout_ms: int, what: str
) -> None:
    if timeout_ms > 0 and not await await_metadata(server.broker, ready, timeout_ms):
        raise KafkaTimeoutError(f"{what} is not in the metadata after {timeout_ms} ms")


def _check_assignments(assignments: Sequence[Any] | None) -> None:
    if assignments:
        raise InvalidReplicaAssignmentError(
            "Yak places replicas itself: send no replica assignment (move replicas later "
            "with a partition reassignment)"
        )


async def _create(
    request: KafkaRequest, topic: Any, dry: bool, timeout_ms: int, cluster_wide: bool
) -> dict[str, Any]:
    server, name = request.server, str(topic.name)
    count = DEFAULT_PARTITIONS if topic.num_partitions == -1 else int(topic.num_partitions)
    factor = None if topic.replication_factor == -1 else int(topic.replication_factor)
    answer: dict[str, Any] = {"name": name, "topic_id": _ZERO_UUID, "configs": None}
    try:
        if not cluster_wide:
            require(request, Operation.CREATE, _TOPIC, name)
        _user_topic(name)
        _check_assignments(topic.assignments)
        if not 1 <= count <= MAX_PARTITIONS:
            raise InvalidPartitionsError(f"number of partitions must be 1-{MAX_PARTITIONS}")
        snapshot = server.broker.snapshot()
        live = sum(1 for b in snapshot.brokers if b not in snapshot.draining)
        if factor is not None and not 1 <= factor <= live:
            raise InvalidReplicationFactorError(
                f"replication factor must be 1-{live} (the live brokers), got {factor}"
            )
        if name in snapshot.topics:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists", topic=name)
        configs = validate_topic_configs(
            {str(c.name): "" if c.value is None else str(c.value) for c in topic.configs}
        )
        if factor is not None:  # else the coordinator's default factor, checked there
            validate_min_insync_replicas(configs, factor)
        if not dry:
            async with controller_admin(request, snapshot) as admin:
                created = await admin.create_topic(
                    name, partitions=count, replication_factor=factor, configs=configs
                )
            made(request, Operation.CREATE, _TOPIC, name)
            factor, configs = created.replication_factor, created.configs
            await _settled(server, _led(name, count), timeout_ms, f"topic {name!r}")
            record = server.broker.snapshot().topics.get(name)
            answer["topic_id"] = topic_uuid(record) if record is not None else _ZERO_UUID
    except YakError as exc:
        answer.update(failure(exc))
        return answer
    answer.update(
        error_code=0,
        error_message=None,
        num_partitions=count,
        replication_factor=-1 if factor is None else factor,
        configs=topic_config_entries(configs),
    )
    return answer


async def _each(
    names: Sequence[str | None],
    items: Sequence[Any],
    one: Callable[[Any], Awaitable[dict[str, Any]]],
    refused: Callable[[Any, YakError], dict[str, Any]],
) -> list[dict[str, Any]]:
    """Answer every item concurrently; a name given twice is INVALID_REQUEST for each."""
    twice = _duplicates(names)

    async def answer(name: str | None, item: Any) -> dict[str, Any]:
        if name in twice:
            return refused(item, InvalidRequestError(f"topic {name!r} appears more than once"))
        return await one(item)

    return list(await asyncio.gather(*(answer(n, i) for n, i in zip(names, items, strict=True))))


async def handle_create_topics(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_CREATE_TOPICS, request.api_version, request.body)
    dry, timeout_ms = bool(parsed.validate_only), _timeout_ms(parsed)
    # Kafka: CREATE on the cluster covers every topic, else CREATE on each topic.
    cluster_wide = bool(visible(request, Operation.CREATE, ResourceType.CLUSTER, [CLUSTER_NAME]))
    topics = await _each(
        [str(t.name) for t in parsed.topics],
        parsed.topics,
        lambda t: _create(request, t, dry, timeout_ms, cluster_wide),
        lambda t, exc: (
            {"name": str(t.name), "topic_id": _ZERO_UUID, "configs": None} | failure(exc)
        ),
    )
    values = {"throttle_time": 0, "topics": topics}
    return write_response(API_CREATE_TOPICS, request.api_version, request.correlation_id, values)


def _named(server: KafkaServer, name: str | None, topic_id: uuid.UUID | None) -> str:
    """The topic a DeleteTopics entry names (v6: by id when the name is null)."""
    snapshot = server.broker.snapshot()
    if name is None:
        by_id = {topic_uuid(r): n for n, r in snapshot.topics.items() if not r.deleting}
        found = by_id.get(topic_id or _ZERO_UUID)
        if found is None:
            raise UnknownTopicIdError(f"no topic has the id {topic_id}")
        return found
    record = snapshot.topics.get(name)
    if record is None or record.deleting:
        raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist", topic=name)
    return name


async def _delete(
    request: KafkaRequest, name: str | None, topic_id: uuid.UUID | None, timeout_ms: int
) -> dict[str, Any]:
    server = request.server
    answer: dict[str, Any] = {"name": name, "topic_id": topic_id or _ZERO_UUID}
    try:
        if name is not None:  # by name: a denial first, whether the topic exists or not
            require(request, Operation.DELETE, _TOPIC, name)
        name = answer["name"] = _named(server, name, topic_id)
        if topic_id is not None:
            require(request, Operation.DELETE, _TOPIC, name)
        record = server.broker.snapshot().topics[name]
        answer["topic_id"] = topic_uuid(record)
        async with controller_admin(request) as admin:
            await admin.delete_topic(name)
        made(request, Operation.DELETE, _TOPIC, name)
        gone = name

        def deleted(snapshot: ClusterSnapshot) -> bool:
            return gone not in snapshot.topics

        await _settled(server, deleted, timeout_ms, f"the deletion of topic {name!r}")
    except YakError as exc:
        answer.update(failure(exc))
        return answer
    answer.update(error_code=0, error_message=None)
    return answer


async def handle_delete_topics(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_DELETE_TOPICS, request.api_version, request.body)
    timeout_ms = _timeout_ms(parsed)
    if hasattr(parsed, "topics"):  # v6: names or topic ids
        wanted = [(t.name, t.topic_id) for t in parsed.topics]
    else:
        wanted = [(str(n), None) for n in parsed.topic_names]
    responses = await _each(
        [name for name, _ in wanted],
        wanted,
        lambda w: _delete(request, w[0], w[1], timeout_ms),
        lambda w, exc: {"name": w[0], "topic_id": w[1] or _ZERO_UUID} | failure(exc),
    )
    values = {"throttle_time": 0, "responses": responses}
    return write_response(API_DELETE_TOPICS, request.api_version, request.correlation_id, values)


async def _grow(request: KafkaRequest, topic: Any, dry: bool, timeout_ms: int) -> dict[str, Any]:
    server, name, count = request.server, str(topic.name), int(topic.count)
    answer: dict[str, Any] = {"name": name}
    try:
        require(request, Operation.ALTER, _TOPIC, name)
        _check_assignments(topic.assignments)
        snapshot = server.broker.snapshot()
        record = snapshot.topics.get(name)
        if record is None or record.deleting:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist", topic=name)
        _user_topic(name)
        if not record.partitions < count <= MAX_PARTITIONS:
            raise InvalidPartitionsError(
                f"topic {name!r} has {record.partitions} partitions; the count can only grow "
                f"(up to {MAX_PARTITIONS}), asked for {count}",
                topic=name,
            )
        if not dry:
            async with controller_admin(request, snapshot) as admin:
                await admin.create_partitions(name, count)
            made(request, Operation.ALTER, _TOPIC, name)
            await _settled(server, _led(name, count), timeout_ms, f"topic {name!r}'s partitions")
    except YakError as exc:
        answer.update(failure(exc))
        return answer
    answer.update(error_code=0, error_message=None)
    return answer


async def handle_create_partitions(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_CREATE_PARTITIONS, request.api_version, request.body)
    dry, timeout_ms = bool(parsed.validate_only), _timeout_ms(parsed)
    results = await _each(
        [str(t.name) for t in parsed.topics],
        parsed.topics,
        lambda t: _grow(request, t, dry, timeout_ms),
        lambda t, exc: {"name": str(t.name)} | failure(exc),
    )
    values = {"throttle_time": 0, "results": results}
    return write_response(
        API_CREATE_PARTITIONS, request.api_version, request.correlation_id, values
    )
