"""Confluent v2 metadata: ``/``, ``/brokers``, ``/topics``, a topic, its partitions and offsets.

Answers come from the proxy's metadata cache (etcd, followed by a watch), so they cost no
request to another service; partition offsets ask the partition's leader.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response

from yak.errors import UnknownTopicOrPartitionError
from yak.metadata.models import PartitionState
from yak.security.acl import Operation, ResourceType
from yak.topic_config import effective_config
from yak_rest_proxy.api.v2.models import (
    V2BrokerList,
    V2PartitionInfo,
    V2PartitionOffsets,
    V2ReplicaInfo,
    V2TopicInfo,
)
from yak_rest_proxy.http.content import negotiate
from yak_rest_proxy.http.responses import json_response
from yak_rest_proxy.runtime import ProxyRuntime
from yak_rest_proxy.security.access import visible

__all__ = ["metadata_router"]

V2_TAG = "Confluent v2"


async def _partition_state(runtime: ProxyRuntime, topic: str, partition: int) -> PartitionState:
    """The partition's state: from the cache when it has it (one lookup), else after a sync
    if the cache knows the topic only in part (``TopicLookup.described``); a partition the
    topic does not have: 40402."""
    snapshot = runtime.cache.snapshot
    known = snapshot.topics.get(topic)
    state = snapshot.partitions.get((topic, partition))
    if state is not None and known is not None and not known.deleting:
        return state
    record, states = await runtime.topics.described(topic)
    state = next((s for s in states if s.partition == partition), None)
    if state is None:
        raise UnknownTopicOrPartitionError(
            f"partition {partition} of topic {topic!r} not found "
            f"(the topic has {record.partitions})",
            topic=topic,
            partition=partition,
        )
    return state


def _partition_info(state: PartitionState) -> V2PartitionInfo:
    return V2PartitionInfo(
        partition=state.partition,
        leader=state.leader,
        replicas=[
            V2ReplicaInfo(broker=b, leader=b == state.leader, in_sync=b in state.isr)
            for b in state.replicas
        ],
    )


def metadata_router(runtime: ProxyRuntime) -> APIRouter:
    router = APIRouter(tags=[V2_TAG])

    @router.get("/", response_model=dict[str, str])
    async def root(request: Request) -> Response:
        """Liveness no-op (Confluent answers ``{}``)."""
        return json_response({}, negotiate(request.headers.get("accept")))

    @router.post("/", response_model=dict[str, str])
    async def root_post(request: Request) -> Response:
        return json_response({}, negotiate(request.headers.get("accept")))

    @router.get("/brokers", response_model=V2BrokerList)
    async def brokers(request: Request) -> Response:
        media = negotiate(request.headers.get("accept"))
        ids = sorted(runtime.cache.snapshot.brokers)
        return json_response(V2BrokerList(brokers=ids), media)

    @router.get("/topics", response_model=list[str])
    async def topics(request: Request) -> Response:
        media = negotiate(request.headers.get("accept"))
        snapshot = runtime.cache.snapshot
        names = sorted(name for name, r in snapshot.topics.items() if not r.deleting)
        return json_response(visible(ResourceType.TOPIC, names, Operation.DESCRIBE), media)

    @router.get("/topics/{topic}", response_model=V2TopicInfo)
    async def topic(request: Request, topic: str) -> Response:
        media = negotiate(request.headers.get("accept"))
        record, states = await runtime.topics.described(topic)
        info = V2TopicInfo(
            name=topic,
            configs=effective_config(record.configs),
            partitions=[_partition_info(s) for s in states],
        )
        return json_response(info, media)

    @router.get("/topics/{topic}/partitions", response_model=list[V2PartitionInfo])
    async def partitions(request: Request, topic: str) -> Response:
        media = negotiate(request.headers.get("accept"))
        _, states = await runtime.topics.described(topic)
        infos = [_partition_info(s).model_dump() for s in states]
        return json_response(infos, media)

    @router.get("/topics/{topic}/partitions/{partition}", response_model=V2PartitionInfo)
    async def partition(request: Request, topic: str, partition: int) -> Response:
        media = negotiate(request.headers.get("accept"))
        state = await _partition_state(runtime, topic, partition)
        return json_response(_partition_info(state), media)

    @router.get("/topics/{topic}/partitions/{partition}/offsets", response_model=V2PartitionOffsets)
    async def offsets(request: Request, topic: str, partition: int) -> Response:
        media = negotiate(request.headers.get("accept"))
        await _partition_state(runtime, topic, partition)
        earliest, latest = await asyncio.gather(
            runtime.reader.list_offsets(topic, partition, "earliest"),
            runtime.reader.list_offsets(topic, partition, "latest"),
        )
        body = V2PartitionOffsets(beginning_offset=earliest.offset, end_offset=latest.offset)
        return json_response(body, media)

    return router
