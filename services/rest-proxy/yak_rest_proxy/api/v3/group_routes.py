"""Confluent v3 consumer groups: list, one, consumers, lags and the lag summary (read-only).

A group's state and members come from the active controller, its committed offsets from etcd
and its end offsets from the partitions' leaders (``consume.group_admin.GroupAdmin``, the native
``/api/v1/groups`` answers' source). A Yak member is a consumer: its member id is the consumer
id and the client id. Lag of a partition is its end offset minus the committed offset.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response

from yak.api.groups import GroupDescription
from yak.errors import GroupIdNotFoundError, YakError
from yak.security.acl import Operation, ResourceType
from yak_rest_proxy.api.v3.admin_routes import V3_TAG, links_of
from yak_rest_proxy.api.v3.errors import ResourceMissingError
from yak_rest_proxy.api.v3.resources import (
    collection,
    consumer_data,
    group_data,
    lag_data,
    lag_summary_data,
)
from yak_rest_proxy.api.v3.v3_route import V3Route
from yak_rest_proxy.consume.group_admin import GroupAdmin
from yak_rest_proxy.http.responses import json_response
from yak_rest_proxy.runtime import ProxyRuntime
from yak_rest_proxy.security.access import visible

__all__ = ["group_router"]

_JSON = "application/json"
_GROUP = "/clusters/{cluster_id}/consumer-groups/{group}"


def group_router(runtime: ProxyRuntime, groups: GroupAdmin) -> APIRouter:
    router = APIRouter(prefix="/v3", tags=[V3_TAG], route_class=V3Route)

    async def describe(group: str) -> GroupDescription:
        try:
            return await groups.describe(runtime.coordinator(), group)
        except GroupIdNotFoundError:
            raise ResourceMissingError(f"Consumer group '{group}' not found.") from None

    async def assignor(group: str) -> str:
        try:
            return (await runtime.coordinator().describe_group(group)).assignor
        except YakError:  # gone since it was listed, or no controller: no name to give
            return ""

    @router.get("/clusters/{cluster_id}/consumer-groups")
    async def list_groups(request: Request, cluster_id: str) -> Response:
        links = links_of(request, runtime, cluster_id)
        listed = (await runtime.coordinator().list_groups()).groups
        allowed = set(visible(ResourceType.GROUP, [g.group_id for g in listed], Operation.DESCRIBE))
        shown = [g for g in listed if g.group_id in allowed]
        assignors = await asyncio.gather(*(assignor(g.group_id) for g in shown))
        data = [
            group_data(links, g.group_id, g.state, name)
            for g, name in zip(shown, assignors, strict=True)
        ]
        url = links.url("consumer-groups")
        return json_response(collection("KafkaConsumerGroupList", url, data), _JSON)

    @router.get(_GROUP)
    async def get_group(request: Request, cluster_id: str, group: str) -> Response:
        links = links_of(request, runtime, cluster_id)
        found = await describe(group)
        return json_response(group_data(links, group, found.state, found.assignor), _JSON)

    @router.get(_GROUP + "/consumers")
    async def list_consumers(request: Request, cluster_id: str, group: str) -> Response:
        links = links_of(request, runtime, cluster_id)
        found = await describe(group)
        data = [consumer_data(links, group, member) for member in found.members]
        url = links.url("consumer-groups", group, "consumers")
        return json_response(collection("KafkaConsumerList", url, data), _JSON)

    @router.get(_GROUP + "/consumers/{consumer_id}")
    async def get_consumer(
        request: Request, cluster_id: str, group: str, consumer_id: str
    ) -> Response:
        links = links_of(request, runtime, cluster_id)
        found = await describe(group)
        for member in found.members:
            if member.member_id == consumer_id:
                return json_response(consumer_data(links, group, member), _JSON)
        raise ResourceMissingError(f"Consumer '{consumer_id}' not found in group '{group}'.")

    @router.get(_GROUP + "/lags")
    async def list_lags(request: Request, cluster_id: str, group: str) -> Response:
        """One entry per partition the group committed an offset for or owns."""
        links = links_of(request, runtime, cluster_id)
        found = await describe(group)
        data = [lag_data(links, group, lag) for lag in found.partitions]
        url = links.url("consumer-groups", group, "lags")
        return json_response(collection("KafkaConsumerLagList", url, data), _JSON)

    @router.get(_GROUP + "/lags/{topic}/partitions/{partition_id}")
    async def get_lag(
        request: Request, cluster_id: str, group: str, topic: str, partition_id: int
    ) -> Response:
        links = links_of(request, runtime, cluster_id)
        found = await describe(group)
        for lag in found.partitions:
            if (lag.topic, lag.partition) == (topic, partition_id):
                return json_response(lag_data(links, group, lag), _JSON)
        raise ResourceMissingError(f"Group '{group}' has no lag on {topic}-{partition_id}.")

    @router.get(_GROUP + "/lag-summary")
    async def lag_summary(request: Request, cluster_id: str, group: str) -> Response:
        links = links_of(request, runtime, cluster_id)
        return json_response(lag_summary_data(links, await describe(group)), _JSON)

    return router
