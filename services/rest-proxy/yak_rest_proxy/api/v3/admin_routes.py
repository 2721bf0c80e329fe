"""Confluent v3 admin: clusters, brokers, topics and partitions (``/v3/clusters…``).

Reads come from the proxy's metadata cache (a topic the cache does not know yet is looked up
again after a sync, as everywhere in the proxy); topic creation and deletion go to the active
controller's admin API, and the answer waits (bounded) until this proxy's cache shows the
change, so a client reads its own write through the same proxy. Every answer is in
Confluent's shapes (``resources``) and every error in its v3 dialect (``errors.V3Route``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from fastapi import APIRouter, Request, Response

from yak.errors import (
    InvalidRequestError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    YakError,
)
from yak.metadata.cache import ClusterSnapshot
from yak.metadata.models import TopicRecord
from yak.names import validate_topic_name
from yak.security.acl import Operation, ResourceType
from yak.topic_config import validate_topic_configs
from yak_rest_proxy.api.v3.errors import ResourceMissingError
from yak_rest_proxy.api.v3.models import CreateTopic
from yak_rest_proxy.api.v3.resources import (
    Links,
    broker_data,
    cluster_data,
    cluster_links,
    collection,
    partition_data,
    topic_data,
)
from yak_rest_proxy.api.v3.v3_route import V3Route
from yak_rest_proxy.http.body import openapi_body, parse_model, read_body
from yak_rest_proxy.http.responses import json_response
from yak_rest_proxy.runtime import ProxyRuntime
from yak_rest_proxy.security.access import visible

__all__ = ["V3_TAG", "admin_router", "links_of"]

V3_TAG = "Confluent v3"
_JSON = "application/json"
_LIMIT = 1024 * 1024
_CATCH_UP_S = 5.0


def links_of(request: Request, runtime: ProxyRuntime, cluster_id: str) -> Links:
    """The links of the cluster the path names, under the ``/v3`` the request came to."""
    base = str(request.base_url).rstrip("/") + "/v3"
    return cluster_links(base, runtime.settings.cluster_id, cluster_id)


async def caught_up(runtime: ProxyRuntime, done: Callable[[ClusterSnapshot], bool]) -> None:
    """Wait (bounded) until this proxy's metadata shows a change the controller confirmed."""
    with contextlib.suppress(YakError, TimeoutError):
        await runtime.cache.wait_for(done, _CATCH_UP_S)


async def described(runtime: ProxyRuntime, topic: str) -> ClusterSnapshot:
    """The snapshot once it holds ``topic`` whole; 404 / 404 if it has no such topic."""
    try:
        await runtime.topics.described(topic)
    except UnknownTopicOrPartitionError:
        raise ResourceMissingError(f"Topic '{topic}' not found.") from None
    return runtime.cache.snapshot


def _create_request(body: CreateTopic) -> CreateTopic:
    validate_topic_name(body.topic_name)
    if body.replicas_assignments:
        raise InvalidRequestError(
            "replicas_assignments is not supported: Yak places replicas itself "
            "(reassign them after creation with the native admin API)",
            kind="invalid_data",
        )
    if any(entry.value is None for entry in body.configs):
        raise InvalidRequestError("configs: every entry needs a value", kind="invalid_data")
    validate_topic_configs({e.name: e.value or "" for e in body.configs})
    return body


def admin_router(runtime: ProxyRuntime) -> APIRouter:
    router = APIRouter(prefix="/v3", tags=[V3_TAG], route_class=V3Route)

    def snapshot() -> ClusterSnapshot:
        return runtime.cache.snapshot  # the newest, at each call

    @router.get("/clusters")
    async def list_clusters(request: Request) -> Response:
        """The one cluster this proxy serves."""
        cluster_id = runtime.settings.cluster_id
        links = links_of(request, runtime, cluster_id)
        one = [cluster_data(links, None)]
        listed = collection("KafkaClusterList", f"{links.base}/clusters", one)
        return json_response(listed, _JSON)

    @router.get("/clusters/{cluster_id}")
    async def get_cluster(request: Request, cluster_id: str) -> Response:
        return json_response(cluster_data(links_of(request, runtime, cluster_id), None), _JSON)

    @router.get("/clusters/{cluster_id}/brokers")
    async def list_brokers(request: Request, cluster_id: str) -> Response:
        """The registered (live) brokers."""
        links = links_of(request, runtime, cluster_id)
        brokers = [broker_data(links, b) for _, b in sorted(snapshot().brokers.items())]
        return json_response(collection("KafkaBrokerList", links.url("brokers"), brokers), _JSON)

    @router.get("/clusters/{cluster_id}/brokers/{broker_id}")
    async def get_broker(request: Request, cluster_id: str, broker_id: int) -> Response:
        links = links_of(request, runtime, cluster_id)
        broker = snapshot().brokers.get(broker_id)
        if broker is None:
            raise ResourceMissingError(f"Broker {broker_id} not found.")
        return json_response(broker_data(links, broker), _JSON)

    @router.get("/clusters/{cluster_id}/topics")
    async def list_topics(request: Request, cluster_id: str) -> Response:
        links = links_of(request, runtime, cluster_id)
        topics = snapshot().topics
        names = sorted(name for name, record in topics.items() if not record.deleting)
        allowed = visible(ResourceType.TOPIC, names, Operation.DESCRIBE)
        data = [topic_data(links, topics[name]) for name in allowed]
        return json_response(collection("KafkaTopicList", links.url("topics"), data), _JSON)

    @router.post(
        "/clusters/{cluster_id}/topics",
        status_code=201,
        openapi_extra=openapi_body(CreateTopic, _JSON),
    )
    async def create_topic(request: Request, cluster_id: str) -> Response:
        """Create a topic (``validate_only``: check the name and configs, create nothing)."""
        links = links_of(request, runtime, cluster_id)
        body = _create_request(parse_model(CreateTopic, await read_body(request, _LIMIT)))
        name = body.topic_name
        if body.validate_only:
            if not _gone(snapshot(), name):
                raise TopicAlreadyExistsError(f"Topic '{name}' already exists.", topic=name)
            would_be = TopicRecord(
                name=name,
                topic_id="",
                partitions=body.partitions_count or 1,
                replication_factor=body.replication_factor or 1,
                configs={e.name: e.value or "" for e in body.configs},
                created_at_ms=0,
            )
            return json_response(topic_data(links, would_be), _JSON, 201)
        created = await runtime.coordinator().create_topic(
            name,
            partitions=body.partitions_count or 1,
            replication_factor=body.replication_factor,
            configs={e.name: e.value or "" for e in body.configs},
        )
        count = created.partition_count
        await caught_up(runtime, lambda snap: len(snap.partitions_of(name)) >= count)
        record = snapshot().topics.get(name) or TopicRecord(  # not seen in time: as told
            name=name,
            topic_id=created.topic_id,
            partitions=created.partition_count,
            replication_factor=created.replication_factor,
            configs=created.configs,
            created_at_ms=0,
        )
        return json_response(topic_data(links, record), _JSON, 201)

    @router.get("/clusters/{cluster_id}/topics/{topic}")
    async def get_topic(request: Request, cluster_id: str, topic: str) -> Response:
        links = links_of(request, runtime, cluster_id)
        found = await described(runtime, topic)
        return json_response(topic_data(links, found.topics[topic]), _JSON)

    @router.delete("/clusters/{cluster_id}/topics/{topic}", status_code=204)
    async def delete_topic(request: Request, cluster_id: str, topic: str) -> Response:
        links_of(request, runtime, cluster_id)
        validate_topic_name(topic)
        await runtime.coordinator().delete_topic(topic)
        await caught_up(runtime, lambda snap: _gone(snap, topic))
        return Response(status_code=204)

    @router.get("/clusters/{cluster_id}/topics/{topic}/partitions")
    async def list_partitions(request: Request, cluster_id: str, topic: str) -> Response:
        links = links_of(request, runtime, cluster_id)
        found = await described(runtime, topic)
        data = [partition_data(links, state) for state in found.partitions_of(topic)]
        url = links.url("topics", topic, "partitions")
        return json_response(collection("KafkaPartitionList", url, data), _JSON)

    @router.get("/clusters/{cluster_id}/topics/{topic}/partitions/{partition_id}")
    async def get_partition(
        request: Request, cluster_id: str, topic: str, partition_id: int
    ) -> Response:
        links = links_of(request, runtime, cluster_id)
        found = await described(runtime, topic)
        state = found.partitions.get((topic, partition_id))
        if state is None:
            raise ResourceMissingError(f"Partition {partition_id} of topic '{topic}' not found.")
        return json_response(partition_data(links, state), _JSON)

    return router


def _gone(snapshot: ClusterSnapshot, topic: str) -> bool:
    record = snapshot.topics.get(topic)
    return record is None or record.deleting
