"""The native group admin API: ``/api/v1/groups`` list, describe with lag, delete, reset."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from yak.api.groups import (
    GroupDescription,
    GroupList,
    GroupSummary,
    OffsetResetRequest,
    OffsetResetResult,
)
from yak.api.records import API_PREFIX
from yak.security.acl import Operation, ResourceType
from yak_rest_proxy.api.native.admin_routes import ADMIN_TAG
from yak_rest_proxy.consume.group_admin import GroupAdmin
from yak_rest_proxy.http.body import openapi_body, parse_model, read_body
from yak_rest_proxy.http.responses import json_response
from yak_rest_proxy.runtime import ProxyRuntime
from yak_rest_proxy.security.access import visible

__all__ = ["group_admin_router"]

_JSON = "application/json"


def group_admin_router(runtime: ProxyRuntime, groups: GroupAdmin) -> APIRouter:
    router = APIRouter(prefix=f"{API_PREFIX}/groups", tags=[ADMIN_TAG])

    @router.get("", response_model=GroupList)
    async def list_groups() -> Response:
        listed = await runtime.coordinator().list_groups()
        ids = [g.group_id for g in listed.groups]
        allowed = set(visible(ResourceType.GROUP, ids, Operation.DESCRIBE))
        body = GroupList(
            groups=[
                GroupSummary(group_id=g.group_id, state=g.state, members=g.member_count)
                for g in listed.groups
                if g.group_id in allowed
            ]
        )
        return json_response(body, _JSON)

    @router.get("/{group}", response_model=GroupDescription)
    async def describe(group: str) -> Response:
        """State, members and, per partition, committed offset, end offset and lag."""
        return json_response(await groups.describe(runtime.coordinator(), group), _JSON)

    @router.delete("/{group}", status_code=204)
    async def delete(group: str) -> Response:
        """Delete an empty group and its committed offsets."""
        await groups.delete(group)
        return Response(status_code=204)

    @router.post(
        "/{group}/offsets/reset",
        response_model=OffsetResetResult,
        openapi_extra=openapi_body(OffsetResetRequest, _JSON),
    )
    async def reset(request: Request, group: str) -> Response:
        """Reset committed offsets (``dry_run`` previews; refused while active unless ``force``)."""
        body = parse_model(OffsetResetRequest, await read_body(request, 1024 * 1024))
        return json_response(await groups.reset(group, body), _JSON)

    return router
