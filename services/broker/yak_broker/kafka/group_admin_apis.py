"""Groups as an administrator sees them: ListGroups (api key 16, v0-v5), DescribeGroups (15,
v0-v5) and DeleteGroups (42, v0-v2), served by the broker's ``GroupCoordinator``.

- ListGroups lists the classic groups this broker coordinates and the REST groups it would win
  by the same hash, so a client that asks every broker (Kafka's AdminClient does) sees each
  group once; v4's states filter and v5's types filter apply (every group is "classic").
- DescribeGroups describes each group named (NOT_COORDINATOR for one led elsewhere): members
  with their metadata and assignments while Stable, as Kafka; a group not led here is Dead, or
  Empty when it has committed offsets. Authorized operations are not reported.
- DeleteGroups deletes a group's keys and offsets only while it has neither Kafka members (no
  marker) nor REST members: NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND when nothing of it
  is stored.

ACLs (``kafka.authorize``), as Kafka's: ListGroups lists the groups the principal may DESCRIBE;
DescribeGroups needs DESCRIBE, DeleteGroups DELETE on each group (else that group's
GROUP_AUTHORIZATION_FAILED, audited); a deletion is audited.
"""

from __future__ import annotations

from yak.errors import MetadataStoreError
from yak.protocol.broker_wire import Buffer
from yak.protocol.kafka_errors import GroupErrorCode
from yak.security.acl import Operation, ResourceType
from yak_broker.kafka.authorize import audit_allowed, authorize, visible
from yak_broker.kafka.context import KafkaRequest
from yak_broker.kafka.groups.state.records import GroupDescription, GroupStateName
from yak_broker.kafka.schemas import read_request, write_response

__all__ = ["handle_delete_groups", "handle_describe_groups", "handle_list_groups"]

API_DESCRIBE_GROUPS, API_LIST_GROUPS, API_DELETE_GROUPS = 15, 16, 42
_UNSET_OPERATIONS = -(2**31)


async def handle_list_groups(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_LIST_GROUPS, request.api_version, request.body)
    states = {s.lower() for s in getattr(parsed, "states_filter", ())}
    types = {t.lower() for t in getattr(parsed, "types_filter", ())}
    error = GroupErrorCode.NONE
    try:
        listed = await request.server.groups.list_groups()
    except MetadataStoreError:
        error, listed = GroupErrorCode.COORDINATOR_NOT_AVAILABLE, []
    shown = set(
        visible(request, Operation.DESCRIBE, ResourceType.GROUP, [g.group_id for g in listed])
    )
    groups = [
        {
            "group_id": g.group_id,
            "protocol_type": g.protocol_type,
            "group_state": str(g.state),
            "group_type": "classic",
        }
        for g in listed
        if g.group_id in shown
        and (not states or g.state.lower() in states)
        and (not types or "classic" in types)
    ]
    values = {"throttle_time": 0, "error_code": error, "groups": groups}
    return write_response(API_LIST_GROUPS, request.api_version, request.correlation_id, values)


async def handle_describe_groups(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_DESCRIBE_GROUPS, request.api_version, request.body)
    described = []
    for group in parsed.groups:
        if authorize(request, Operation.DESCRIBE, ResourceType.GROUP, str(group)):
            error, view = await request.server.groups.describe(str(group))
        else:
            error = GroupErrorCode.GROUP_AUTHORIZATION_FAILED
            view = GroupDescription(str(group), GroupStateName.DEAD, "", "", ())
        described.append(
            {
                "error_code": error,
                "group_id": view.group_id,
                "group_state": str(view.state),
                "protocol_type": view.protocol_type,
                "protocol_data": view.protocol_name,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in view.members
                ],
                "authorized_operations": _UNSET_OPERATIONS,
            }
        )
    values = {"throttle_time": 0, "groups": described}
    return write_response(API_DESCRIBE_GROUPS, request.api_version, request.correlation_id, values)


async def handle_delete_groups(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_DELETE_GROUPS, request.api_version, request.body)
    results = [
        {"group_id": group, "error_code": await _delete(request, str(group))}
        for group in parsed.groups_names
    ]
    values = {"throttle_time": 0, "results": results}
    return write_response(API_DELETE_GROUPS, request.api_version, request.correlation_id, values)


async def _delete(request: KafkaRequest, group: str) -> GroupErrorCode:
    if not authorize(request, Operation.DELETE, ResourceType.GROUP, group):
        return GroupErrorCode.GROUP_AUTHORIZATION_FAILED
    error = await request.server.groups.delete(group)
    if error is GroupErrorCode.NONE:
        audit_allowed(request, [f"GROUP:{group}"], Operation.DELETE)
    return error
