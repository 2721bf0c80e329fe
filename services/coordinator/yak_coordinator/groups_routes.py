"""The consumer-group routes of the admin API (``/admin/v1/groups``): read only.

Each handler calls one ``GroupAdmin`` method and turns its ``GroupSnapshot`` into the wire
models of ``yak.api.admin``. A group id that is not legal is 400 ``INVALID_GROUP_ID``; a group
of which nothing is stored is 404 ``GROUP_ID_NOT_FOUND``.
"""

from __future__ import annotations

from fastapi import APIRouter

from yak.api.admin import (
    ADMIN_PREFIX,
    AssignedPartitions,
    GroupDescription,
    GroupList,
    GroupMemberDescription,
    GroupSummary,
)
from yak.metadata.models import Assignment, GroupMember, GroupState
from yak.security.acl import ResourceType
from yak_coordinator.groups.group_admin import GroupSnapshot
from yak_coordinator.security.guard import visible
from yak_coordinator.service import Coordinator

__all__ = ["group_description", "groups_router"]


def _partitions(assignment: Assignment) -> list[AssignedPartitions]:
    return [AssignedPartitions(topic=t.topic, partitions=list(t.partitions)) for t in assignment]


def _member(member_id: str, record: GroupMember, stored: GroupState) -> GroupMemberDescription:
    return GroupMemberDescription(
        member_id=member_id,
        client_id=record.client_id,
        client_host=record.client_host,
        subscription=list(record.subscription),
        subscription_pattern=record.subscription_pattern,
        manual_assignment=_partitions(record.manual_assignment),
        assignor=record.assignor,
        owned=_partitions(record.owned),
        target=_partitions(stored.target_assignment.get(member_id, ())),
        current=_partitions(stored.current_assignment.get(member_id, ())),
        member_epoch=stored.member_epochs.get(member_id, -1),
        acknowledged_epoch=record.member_epoch,
        revoking_since_ms=stored.revoking_since_ms.get(member_id),
    )


def group_description(group: GroupSnapshot) -> GroupDescription:
    """The wire form of a described group."""
    stored = group.stored if group.stored is not None else GroupState(group_id=group.group_id)
    return GroupDescription(
        group_id=group.group_id,
        state=group.state.value,
        group_epoch=stored.group_epoch,
        assignment_epoch=stored.assignment_epoch,
        assignor=stored.assignor,
        members=[_member(m, record, stored) for m, record in sorted(group.members.items())],
    )


def groups_router(coordinator: Coordinator) -> APIRouter:
    """The consumer-group routes of one coordinator."""
    router = APIRouter(prefix=ADMIN_PREFIX, tags=["groups"])

    @router.get("/groups")
    async def list_groups() -> GroupList:
        groups = await coordinator.group_admin.list_groups()
        shown = visible(ResourceType.GROUP, [g.group_id for g in groups])
        return GroupList(
            groups=[
                GroupSummary(group_id=g.group_id, state=g.state.value, member_count=len(g.members))
                for g in groups
                if g.group_id in shown
            ]
        )

    @router.get("/groups/{group_id}")
    async def describe_group(group_id: str) -> GroupDescription:
        return group_description(await coordinator.group_admin.describe_group(group_id))

    return router
