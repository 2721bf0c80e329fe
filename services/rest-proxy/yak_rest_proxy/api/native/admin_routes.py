"""The native admin API (``/api/v1``): cluster, brokers, topics and their configs.

Topic changes go to the active controller's admin API (found in the metadata: any proxy reaches
it; while none is elected the answer is 503 ``NOT_CONTROLLER``); reads that the metadata cache
can answer are served from it. Bodies and answers are the admin API's models
(``yak.api.admin``), so a client of either speaks both.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from yak.api.admin import (
    AlterConfigsRequest,
    BrokerInfo,
    BrokerLogDir,
    BrokerTopicLogs,
    ClusterInfo,
    CreatePartitionsRequest,
    CreateTopicRequest,
    LogDirs,
    PartitionOffset,
    ReplicaLog,
    TopicDeleted,
    TopicDescription,
    TopicDescriptionList,
    TopicList,
    TopicLog,
    TopicLogDirs,
)
from yak.api.records import API_PREFIX
from yak.errors import InvalidRequestError, YakError
from yak.metadata.cache import ClusterSnapshot
from yak.metadata.describe import broker_listing, topic_description
from yak.metadata.models import BrokerRegistration
from yak.names import validate_topic_name
from yak.security.acl import Operation, ResourceType
from yak_rest_proxy.http.body import openapi_body, parse_model, read_body
from yak_rest_proxy.http.responses import json_response
from yak_rest_proxy.runtime import ProxyRuntime
from yak_rest_proxy.security.access import visible

__all__ = ["admin_router"]

#: ``earliest``, ``latest`` or up to 18 ASCII digits (checked whole: ``re.fullmatch``, and
#: pydantic's regex engine, whose ``$`` is the end of the text).
_TIMESTAMP = r"^(earliest|latest|[0-9]{1,18})$"

_CATCH_UP_S = 5.0


async def _caught_up(runtime: ProxyRuntime, done: Callable[[ClusterSnapshot], bool]) -> None:
    """Wait (bounded) until this proxy's metadata shows a change the controller confirmed, so
    a client reads its own write through the same proxy."""
    with contextlib.suppress(YakError, TimeoutError):
        await runtime.cache.wait_for(done, _CATCH_UP_S)


ADMIN_TAG = "native admin"
_JSON = "application/json"
_LIMIT = 1024 * 1024
#: How long ``/log-dirs`` waits for a broker before listing it with an error.
_LOG_DIR_TIMEOUT_S = 5.0


def admin_router(runtime: ProxyRuntime) -> APIRouter:
    router = APIRouter(prefix=API_PREFIX, tags=[ADMIN_TAG])

    @router.get("/cluster", response_model=ClusterInfo)
    async def cluster() -> Response:
        """Brokers, the active controller and partition health counts."""
        return json_response(await runtime.coordinator().cluster(), _JSON)

    @router.get("/brokers", response_model=list[BrokerInfo])
    async def brokers() -> Response:
        """Every broker the cluster knows, from the proxy's metadata: registered ones (``up``,
        ``shutting_down``) and recorded ones that left (``down``, with ``last_seen_ms``)."""
        listing = broker_listing(runtime.cache.snapshot, runtime.clock.time_ms())
        listed = [b.model_dump(mode="json") for b in listing]
        return json_response(listed, _JSON)

    @router.get("/log-dirs", response_model=LogDirs)
    async def log_dirs(
        topic: Annotated[
            list[str], Query(description="Only these topics' replicas (repeatable).")
        ] = [],  # noqa: B006 (FastAPI copies defaults)
        broker: Annotated[list[int], Query(description="Only these brokers (repeatable).")] = [],  # noqa: B006 (FastAPI copies defaults)
    ) -> Response:
        """Every live broker's data folder: disk usage and each replica's size and offsets
        (Kafka's DescribeLogDirs). A broker that does not answer is listed with ``error``.
        At thousands of partitions ask for some topics or brokers, or for the per-topic sums
        (``/log-dirs/topics``): the full listing has an entry per replica."""
        for name in topic:
            validate_topic_name(name)
        brokers = _brokers(runtime, broker)
        dirs = await asyncio.gather(*(_log_dir(runtime, b, topic or None) for b in brokers))
        return json_response(LogDirs(brokers=list(dirs)), _JSON)

    @router.get("/log-dirs/topics", response_model=TopicLogDirs)
    async def log_dir_topics(
        broker: Annotated[list[int], Query(description="Only these brokers (repeatable).")] = [],  # noqa: B006 (FastAPI copies defaults)
    ) -> Response:
        """Every live broker's data folder with its replicas summed per topic: one entry per
        topic and broker whatever the partition count (what a dashboard polls). A broker
        that does not answer is listed with ``error``."""
        brokers = _brokers(runtime, broker)
        dirs = await asyncio.gather(*(_topic_logs(runtime, b) for b in brokers))
        return json_response(TopicLogDirs(brokers=list(dirs)), _JSON)

    @router.get("/topics/{topic}/partitions/{partition}/offsets", response_model=PartitionOffset)
    async def partition_offset(
        topic: str,
        partition: int,
        timestamp: Annotated[
            str,
            Query(
                description="``earliest`` (the log start), ``latest`` (the high watermark) "
                "or milliseconds since the epoch: the first offset at or after it.",
                pattern=_TIMESTAMP,
            ),
        ] = "latest",
    ) -> Response:
        """ListOffsets of one partition, at its leader."""
        await runtime.topics.record(topic)
        where = _timestamp(timestamp)
        found = await runtime.reader.list_offsets(topic, partition, where)
        answer = PartitionOffset(topic=topic, partition=partition, offset=found.offset)
        return json_response(answer, _JSON)

    @router.get("/topics", response_model=TopicList)
    async def list_topics() -> Response:
        listed = await runtime.coordinator().list_topics()
        names = set(
            visible(ResourceType.TOPIC, [t.name for t in listed.topics], Operation.DESCRIBE)
        )
        topics = [topic for topic in listed.topics if topic.name in names]
        return json_response(listed.model_copy(update={"topics": topics}), _JSON)

    @router.post(
        "/topics",
        status_code=201,
        response_model=TopicDescription,
        openapi_extra=openapi_body(CreateTopicRequest, _JSON),
    )
    async def create_topic(request: Request) -> Response:
        body = parse_model(CreateTopicRequest, await read_body(request, _LIMIT))
        validate_topic_name(body.name)
        created = await runtime.coordinator().create_topic(
            body.name,
            partitions=body.partitions,
            replication_factor=body.replication_factor,
            configs=body.configs,
        )
        await _caught_up(runtime, lambda snap: _shows(snap, created))
        return json_response(created, _JSON, 201)

    @router.get("/topics/{topic}", response_model=TopicDescription)
    async def describe_topic(topic: str) -> Response:
        """Served from the proxy's metadata cache (no round trip to the controller)."""
        record, partitions = await runtime.topics.described(topic)
        return json_response(topic_description(record, partitions), _JSON)

    @router.get("/topic-descriptions", response_model=TopicDescriptionList)
    async def describe_topics(
        topic: Annotated[
            list[str],
            Query(description="Topics to describe (repeatable); every topic when absent."),
        ] = [],  # noqa: B006 (FastAPI copies defaults)
    ) -> Response:
        """Many topics in one answer, by name, from the metadata cache: the ones asked for
        (``?topic=a&topic=b``; unknown ones left out) or every topic the caller may describe.
        A list page (the console's topics, a tool's inventory) makes one request, not one
        per topic. Named topics the cache lacks, wholly or in part, are looked for again
        after one sync with etcd, as ``/topics/{topic}`` does."""
        if not topic:
            snapshot = runtime.cache.snapshot
            names = sorted(n for n, r in snapshot.topics.items() if not r.deleting)
        else:
            for name in topic:
                validate_topic_name(name)
            snapshot = await runtime.topics.snapshot_of(set(topic))
            names = sorted({n for n in topic if n in snapshot.topics})
        described = [
            topic_description(snapshot.topics[name], snapshot.partitions_of(name))
            for name in visible(ResourceType.TOPIC, names, Operation.DESCRIBE)
            if not snapshot.topics[name].deleting
        ]
        return json_response(TopicDescriptionList(topics=described), _JSON)

    @router.delete("/topics/{topic}", response_model=TopicDeleted)
    async def delete_topic(topic: str) -> Response:
        validate_topic_name(topic)
        deleted = await runtime.coordinator().delete_topic(topic)
        await _caught_up(runtime, lambda snap: _gone(snap, topic))
        return json_response(deleted, _JSON)

    @router.patch(
        "/topics/{topic}/configs",
        response_model=TopicDescription,
        openapi_extra=openapi_body(AlterConfigsRequest, _JSON),
    )
    async def alter_configs(request: Request, topic: str) -> Response:
        validate_topic_name(topic)
        body = parse_model(AlterConfigsRequest, await read_body(request, _LIMIT))
        altered = await runtime.coordinator().alter_topic_configs(
            topic, set_configs=body.set, delete_configs=body.delete
        )
        await _caught_up(runtime, lambda snap: _shows(snap, altered))
        return json_response(altered, _JSON)

    @router.post(
        "/topics/{topic}/partitions",
        response_model=TopicDescription,
        openapi_extra=openapi_body(CreatePartitionsRequest, _JSON),
    )
    async def create_partitions(request: Request, topic: str) -> Response:
        validate_topic_name(topic)
        body = parse_model(CreatePartitionsRequest, await read_body(request, _LIMIT))
        grown = await runtime.coordinator().create_partitions(topic, body.count)
        await _caught_up(runtime, lambda snap: _shows(snap, grown))
        return json_response(grown, _JSON)

    return router


def _timestamp(text: str) -> int | str:
    if text in ("earliest", "latest"):
        return text
    if re.fullmatch(_TIMESTAMP, text):
        return int(text)  # ASCII digits only: str.isdigit() also takes '²', which int() refuses
    raise InvalidRequestError(
        f"timestamp must be 'earliest', 'latest' or milliseconds >= 0, got {text[:40]!r}"
    )


def _brokers(runtime: ProxyRuntime, wanted: list[int]) -> list[BrokerRegistration]:
    """The registered brokers (only ``wanted``, when given), by id."""
    registered = sorted(runtime.cache.snapshot.brokers.items())
    return [b for broker_id, b in registered if not wanted or broker_id in wanted]


async def _log_dir(
    runtime: ProxyRuntime, broker: BrokerRegistration, topics: list[str] | None
) -> BrokerLogDir:
    try:
        async with asyncio.timeout(_LOG_DIR_TIMEOUT_S):
            listing = await runtime.brokers.client(broker).partitions(topics)
    except (YakError, OSError, TimeoutError) as exc:
        return BrokerLogDir(broker_id=broker.broker_id, error=str(exc) or type(exc).__name__)
    replicas = [
        ReplicaLog(
            topic=p.topic,
            partition=p.partition,
            is_leader=p.is_leader,
            leader_epoch=p.leader_epoch,
            size_bytes=p.size_bytes,
            segments=p.segments,
            log_start_offset=p.log_start_offset,
            high_watermark=p.high_watermark,
            log_end_offset=p.log_end_offset,
        )
        for p in listing.partitions
    ]
    return BrokerLogDir(
        broker_id=broker.broker_id,
        log_dir=listing.log_dir,
        disk_total_bytes=listing.disk_total_bytes,
        disk_free_bytes=listing.disk_free_bytes,
        size_bytes=sum(p.size_bytes for p in listing.partitions),
        replicas=replicas,
    )


async def _topic_logs(runtime: ProxyRuntime, broker: BrokerRegistration) -> BrokerTopicLogs:
    try:
        async with asyncio.timeout(_LOG_DIR_TIMEOUT_S):
            summary = await runtime.brokers.client(broker).log_dir()
    except (YakError, OSError, TimeoutError) as exc:
        return BrokerTopicLogs(broker_id=broker.broker_id, error=str(exc) or type(exc).__name__)
    topics = [TopicLog(**t.model_dump()) for t in summary.topics]
    return BrokerTopicLogs(
        broker_id=broker.broker_id,
        log_dir=summary.log_dir,
        disk_total_bytes=summary.disk_total_bytes,
        disk_free_bytes=summary.disk_free_bytes,
        size_bytes=sum(t.size_bytes for t in topics),
        replicas=sum(t.replicas for t in topics),
        leaders=sum(t.leaders for t in topics),
        topics=topics,
    )


def _shows(snapshot: ClusterSnapshot, described: TopicDescription) -> bool:
    record = snapshot.topics.get(described.name)
    return (
        record is not None
        and record.partitions == described.partition_count
        and dict(record.configs) == described.configs
        and len(snapshot.partitions_of(described.name)) == described.partition_count
    )


def _gone(snapshot: ClusterSnapshot, topic: str) -> bool:
    record = snapshot.topics.get(topic)
    return record is None or record.deleting
