"""The native admin API (``/api/v1``): cluster, brokers, topics and their configs.

Topic changes go to the active controller's admin API (found in the metadata: any proxy reaches
it; while none is elected the answer is 503 ``NOT_CONTROLLER``); reads that the metadata cache
can answer are served from it. Bodies and answers are the admin API's models
(``yak.api.admin``), so a client of either speaks both.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from fastapi import APIRouter, Request, Response

from yak.api.admin import (
    AlterConfigsRequest,
    BrokerInfo,
    ClusterInfo,
    CreatePartitionsRequest,
    CreateTopicRequest,
    TopicDeleted,
    TopicDescription,
    TopicList,
)
from yak.api.records import API_PREFIX
from yak.errors import YakError
from yak.metadata.cache import ClusterSnapshot
from yak.names import validate_topic_name
from yak_rest_proxy.http.body import openapi_body, parse_model, read_body
from yak_rest_proxy.http.responses import json_response
from yak_rest_proxy.runtime import ProxyRuntime
from yak_rest_proxy.v2.metadata_routes import topic_record

__all__ = ["admin_router"]

_CATCH_UP_S = 5.0


async def _caught_up(runtime: ProxyRuntime, done: Callable[[ClusterSnapshot], bool]) -> None:
    """Wait (bounded) until this proxy's metadata shows a change the controller confirmed, so
    a client reads its own write through the same proxy."""
    with contextlib.suppress(YakError, TimeoutError):
        await runtime.cache.wait_for(done, _CATCH_UP_S)


ADMIN_TAG = "native admin"
_JSON = "application/json"
_LIMIT = 1024 * 1024


def admin_router(runtime: ProxyRuntime) -> APIRouter:
    router = APIRouter(prefix=API_PREFIX, tags=[ADMIN_TAG])

    @router.get("/cluster", response_model=ClusterInfo)
    async def cluster() -> Response:
        """Brokers, the active controller and partition health counts."""
        return json_response(await runtime.coordinator().cluster(), _JSON)

    @router.get("/brokers", response_model=list[BrokerInfo])
    async def brokers() -> Response:
        """The live brokers, from the proxy's metadata (registrations in etcd)."""
        snapshot = runtime.cache.snapshot
        listed = [
            BrokerInfo(
                broker_id=b.broker_id,
                host=b.host,
                port=b.port,
                rack=b.rack,
                shutting_down=b.shutting_down,
            ).model_dump()
            for _, b in sorted(snapshot.brokers.items())
        ]
        return json_response(listed, _JSON)

    @router.get("/topics", response_model=TopicList)
    async def list_topics() -> Response:
        return json_response(await runtime.coordinator().list_topics(), _JSON)

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
        snapshot = runtime.cache.snapshot
        record = topic_record(snapshot, topic)
        described = TopicDescription.of(record, snapshot.partitions_of(topic))
        return json_response(described, _JSON)

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
        return json_response(
            await runtime.coordinator().create_partitions(topic, body.count), _JSON
        )

    return router


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
