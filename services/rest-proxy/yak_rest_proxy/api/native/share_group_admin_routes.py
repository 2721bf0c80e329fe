"""The native share-group admin API: ``/api/v1/share-groups`` create, list, describe, alter,
delete.

Every request goes to the active controller's ``/admin/v1/share-groups`` (the coordinator is
the only writer of share groups; found in the metadata, 503 ``NOT_CONTROLLER`` while none is
elected), so the bodies, answers and error codes are the coordinator's (``yak.api.
share_groups``). After a write the handler waits (bounded) until this proxy's metadata cache
shows it, so the share-fetch paths of this proxy see the group a client has just created.
The list is filtered to the groups the caller may DESCRIBE. A description carries the group's
live state, asked of every broker (``share_group_live``; ``?topic=`` adds those topics'
partitions nobody has read yet). A name that is not legal is 400
``INVALID_GROUP_ID`` where a group would be created and 404 ``GROUP_ID_NOT_FOUND`` where one is
looked up (the coordinator decides both).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from yak.api.records import API_PREFIX
from yak.api.share_groups import (
    AlterShareGroupRequest,
    CreateShareGroupRequest,
    ShareGroupDeleted,
    ShareGroupDescription,
    ShareGroupList,
)
from yak.errors import YakError
from yak.metadata.snapshot import ClusterSnapshot
from yak.security.acl import Operation, ResourceType
from yak_rest_proxy.api.native.admin_routes import ADMIN_TAG
from yak_rest_proxy.api.native.share_group_live import gather_live_state
from yak_rest_proxy.http.body import openapi_body, parse_model, read_body
from yak_rest_proxy.http.responses import json_response
from yak_rest_proxy.runtime import ProxyRuntime
from yak_rest_proxy.security.access import visible

__all__ = ["share_group_admin_router"]

_JSON = "application/json"
_LIMIT = 64 * 1024
_CATCH_UP_S = 5.0


async def _caught_up(runtime: ProxyRuntime, done: Callable[[ClusterSnapshot], bool]) -> None:
    with contextlib.suppress(YakError, TimeoutError):
        await runtime.cache.wait_for(done, _CATCH_UP_S)


def _shows(snapshot: ClusterSnapshot, group: ShareGroupDescription) -> bool:
    record = snapshot.share_groups.get(group.name)
    return record is not None and (
        record.dead_letter_topic,
        record.max_delivery_attempts,
        record.lock_duration_ms,
        record.offset_reset.value,
    ) == (
        group.dead_letter_topic,
        group.max_delivery_attempts,
        group.lock_duration_ms,
        group.offset_reset,
    )


def share_group_admin_router(runtime: ProxyRuntime) -> APIRouter:
    router = APIRouter(prefix=f"{API_PREFIX}/share-groups", tags=[ADMIN_TAG])

    @router.get("", response_model=ShareGroupList)
    async def list_share_groups() -> Response:
        listed = await runtime.coordinator().list_share_groups()
        names = [g.name for g in listed.share_groups]
        allowed = set(visible(ResourceType.GROUP, names, Operation.DESCRIBE))
        shown = [g for g in listed.share_groups if g.name in allowed]
        return json_response(ShareGroupList(share_groups=shown), _JSON)

    @router.post(
        "",
        status_code=201,
        response_model=ShareGroupDescription,
        openapi_extra=openapi_body(CreateShareGroupRequest, _JSON),
    )
    async def create_share_group(request: Request) -> Response:
        """A share group (KIP-932 queue) with its dead-letter topic, delivery limit, record
        lock and offset reset; the cluster's share state topic is made with the first one."""
        body = parse_model(CreateShareGroupRequest, await read_body(request, _LIMIT))
        created = await runtime.coordinator().create_share_group(body)
        await _caught_up(runtime, lambda snap: _shows(snap, created))
        return json_response(created, _JSON, 201)

    @router.get("/{group}", response_model=ShareGroupDescription)
    async def describe_share_group(
        group: str,
        topic: Annotated[
            list[str], Query(description="Also these topics' partitions nobody read yet.")
        ] = [],  # noqa: B006 (FastAPI copies defaults)
    ) -> Response:
        """The group's settings (the coordinator's) and its live state (``live``: what every
        broker holds of it now, ``share_group_live``)."""
        described = await runtime.coordinator().describe_share_group(group)
        live = await gather_live_state(runtime, group, topic)
        return json_response(described.model_copy(update={"live": live}), _JSON)

    @router.patch(
        "/{group}",
        response_model=ShareGroupDescription,
        openapi_extra=openapi_body(AlterShareGroupRequest, _JSON),
    )
    async def alter_share_group(request: Request, group: str) -> Response:
        """Change the settings present in the body (``"dead_letter_topic": null`` removes it)."""
        body = parse_model(AlterShareGroupRequest, await read_body(request, _LIMIT))
        altered = await runtime.coordinator().alter_share_group(group, body)
        await _caught_up(runtime, lambda snap: _shows(snap, altered))
        return json_response(altered, _JSON)

    @router.delete("/{group}", response_model=ShareGroupDeleted)
    async def delete_share_group(group: str) -> Response:
        """Delete the group; the partitions' leaders drop its share-partitions and state."""
        deleted = await runtime.coordinator().delete_share_group(group)
        await _caught_up(runtime, lambda snap: group not in snap.share_groups)
        return json_response(deleted, _JSON)

    return router
