"""The share-group routes of the admin API (``/admin/v1/share-groups``).

Each handler calls one ``ShareGroupAdmin`` method and answers with the models of
``yak.api.share_groups``. Codes: 400 ``INVALID_GROUP_ID`` (a bad name), 400 ``INVALID_CONFIG``
(a setting out of range, with the bound), 400 ``INVALID_TOPIC_EXCEPTION`` / 404
``UNKNOWN_TOPIC_OR_PARTITION`` (a dead-letter topic that is reserved / does not exist), 409
``DUPLICATE_RESOURCE`` (the name is taken), 404 ``GROUP_ID_NOT_FOUND`` (no such group).
"""

from __future__ import annotations

from fastapi import APIRouter, status

from yak.api.admin import ADMIN_PREFIX
from yak.api.share_groups import (
    AlterShareGroupRequest,
    CreateShareGroupRequest,
    ShareGroupDeleted,
    ShareGroupDescription,
    ShareGroupList,
)
from yak.metadata.models import ShareGroupRecord, ShareOffsetReset
from yak.security.acl import ResourceType
from yak_coordinator.decisions.share_group_rules import ShareGroupChanges, ShareGroupSettings
from yak_coordinator.forwarding import ADMIN_BODY_LIMIT
from yak_coordinator.security.guard import visible
from yak_coordinator.service import Coordinator

__all__ = ["share_group_description", "share_groups_router"]


def share_group_description(record: ShareGroupRecord) -> ShareGroupDescription:
    """The wire form of a share group."""
    return ShareGroupDescription(
        name=record.name,
        created_at_ms=record.created_at_ms,
        dead_letter_topic=record.dead_letter_topic,
        max_delivery_attempts=record.max_delivery_attempts,
        lock_duration_ms=record.lock_duration_ms,
        offset_reset=record.offset_reset.value,
        deleting=record.deleting,
    )


def _settings(body: CreateShareGroupRequest) -> ShareGroupSettings:
    return ShareGroupSettings(
        dead_letter_topic=body.dead_letter_topic,
        max_delivery_attempts=body.max_delivery_attempts,
        lock_duration_ms=body.lock_duration_ms,
        offset_reset=ShareOffsetReset(body.offset_reset),
    )


def _changes(body: AlterShareGroupRequest) -> ShareGroupChanges:
    return ShareGroupChanges(
        dead_letter_topic=body.dead_letter_topic,
        clear_dead_letter_topic=body.clears_dead_letter_topic,
        max_delivery_attempts=body.max_delivery_attempts,
        lock_duration_ms=body.lock_duration_ms,
        offset_reset=None if body.offset_reset is None else ShareOffsetReset(body.offset_reset),
    )


def share_groups_router(coordinator: Coordinator) -> APIRouter:
    """The share-group routes of one coordinator."""
    router = APIRouter(
        prefix=f"{ADMIN_PREFIX}/share-groups", tags=["share groups"], max_body_size=ADMIN_BODY_LIMIT
    )

    @router.get("")
    async def list_share_groups() -> ShareGroupList:
        """The share groups (with security on: those the caller may DESCRIBE)."""
        records = coordinator.share_group_admin.list_groups()
        shown = visible(ResourceType.GROUP, [r.name for r in records])
        return ShareGroupList(
            share_groups=[share_group_description(r) for r in records if r.name in shown]
        )

    @router.post("", status_code=status.HTTP_201_CREATED)
    async def create_share_group(body: CreateShareGroupRequest) -> ShareGroupDescription:
        record = await coordinator.share_group_admin.create(body.name, _settings(body))
        return share_group_description(record)

    @router.get("/{group_id}")
    async def describe_share_group(group_id: str) -> ShareGroupDescription:
        return share_group_description(coordinator.share_group_admin.describe(group_id))

    @router.patch("/{group_id}")
    async def alter_share_group(
        group_id: str, body: AlterShareGroupRequest
    ) -> ShareGroupDescription:
        record = await coordinator.share_group_admin.alter(group_id, _changes(body))
        return share_group_description(record)

    @router.delete("/{group_id}")
    async def delete_share_group(group_id: str) -> ShareGroupDeleted:
        """Mark the group deleting, then remove it (the leaders drop its state)."""
        record = await coordinator.share_group_admin.delete(group_id)
        return ShareGroupDeleted(name=group_id, group=share_group_description(record))

    return router
