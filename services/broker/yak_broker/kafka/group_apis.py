"""The classic group protocol on the wire: JoinGroup (api key 11, v0-v9), SyncGroup (14, v0-v5),
Heartbeat (12, v0-v4) and LeaveGroup (13, v0-v5), served by the broker's ``GroupCoordinator``
(``kafka/groups/``; docs/decisions.md, "Kafka classic groups").

Each handler parses the whole request, translates its version into the machine's records and
back (the machine speaks the newest shape):
- JoinGroup v0 has no rebalance timeout: it is the session timeout; from v4 a newcomer without
  a member id gets MEMBER_ID_REQUIRED and its id first (``require_known_member_id``);
  ``skip_assignment`` is answered from v9 only (older versions drop it); v5+ static members.
- SyncGroup v5 carries the protocol type and name, which the machine checks.
- LeaveGroup v0-v2 names one member by id; v3+ a batch with instance ids.
A group this broker does not coordinate answers NOT_COORDINATOR; an invalid group id
INVALID_GROUP_ID. ACLs (``kafka.authorize``), as Kafka's: all four need READ on the group,
else GROUP_AUTHORIZATION_FAILED (audited).

**Parked answers and ordering.** A JoinGroup (and a follower's SyncGroup) waits for the round,
up to the rebalance timeout. K1's listener serves each request of a connection in a task of its
own and writes the answers in request order: a parked JoinGroup holds back only the answers of
the requests behind it *on its own connection*, never another connection's. Kafka's clients
expect exactly this: they send group requests on a coordinator connection of their own and
wait for the JoinGroup answer before sending the next group request (heartbeats pause during a
rebalance). The member's session does not run while its join or sync is parked.
"""

from __future__ import annotations

from typing import Any

from yak.protocol.broker_wire import Buffer
from yak.protocol.kafka_errors import GroupErrorCode
from yak.security.acl import Operation, ResourceType
from yak_broker.kafka.authorize import authorize
from yak_broker.kafka.context import KafkaRequest
from yak_broker.kafka.groups.coordinator import GroupCoordinator
from yak_broker.kafka.groups.state.records import (
    Heartbeat,
    JoinGroup,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMember,
    Protocol,
    SyncGroup,
    SyncGroupResult,
)
from yak_broker.kafka.schemas import read_request, write_response

__all__ = [
    "handle_heartbeat",
    "handle_join_group",
    "handle_leave_group",
    "handle_sync_group",
]

API_JOIN_GROUP, API_HEARTBEAT, API_LEAVE_GROUP, API_SYNC_GROUP = 11, 12, 13, 14


def groups_of(request: KafkaRequest) -> GroupCoordinator:
    return request.server.groups


def may_read(request: KafkaRequest, group: str) -> bool:
    """Whether the principal may READ the group (a denial is audited)."""
    return authorize(request, Operation.READ, ResourceType.GROUP, group)


_DENIED = GroupErrorCode.GROUP_AUTHORIZATION_FAILED


def _client_host(request: KafkaRequest) -> str:
    """The member's address as Kafka shows it (``/host``); known on a SASL listener only
    (the request carries no peer otherwise)."""
    session = request.session
    return "" if session is None else "/" + session.peer.rpartition(":")[0]


def _ms(value: Any) -> int:
    """A kio timedelta field in milliseconds."""
    return int(value.total_seconds() * 1000)


async def handle_join_group(request: KafkaRequest) -> list[Buffer]:
    version = request.api_version
    parsed = read_request(API_JOIN_GROUP, version, request.body)
    session_ms = _ms(parsed.session_timeout)
    rebalance = getattr(parsed, "rebalance_timeout", None)
    join = JoinGroup(
        0,  # the driver numbers it
        parsed.member_id,
        parsed.protocol_type,
        tuple(Protocol(p.name, p.metadata) for p in parsed.protocols),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=session_ms if rebalance is None else _ms(rebalance),
        group_instance_id=getattr(parsed, "group_instance_id", None),
        require_known_member_id=version >= 4,
        client_id=request.client_id or "",
        client_host=_client_host(request),
        reason=getattr(parsed, "reason", None) or "",
    )
    group = str(parsed.group_id)
    if may_read(request, group):
        result = await groups_of(request).join(group, join)
    else:
        result = JoinGroupResult(_DENIED, parsed.member_id)
    values = {
        "throttle_time": 0,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name if version >= 7 else result.protocol_name or "",
        "leader": result.leader,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata,
            }
            for m in result.members
        ],
    }
    return write_response(API_JOIN_GROUP, version, request.correlation_id, values)


async def handle_sync_group(request: KafkaRequest) -> list[Buffer]:
    version = request.api_version
    parsed = read_request(API_SYNC_GROUP, version, request.body)
    sync = SyncGroup(
        0,
        parsed.member_id,
        int(parsed.generation_id),
        group_instance_id=getattr(parsed, "group_instance_id", None),
        protocol_type=getattr(parsed, "protocol_type", None),
        protocol_name=getattr(parsed, "protocol_name", None),
        assignments=tuple((a.member_id, a.assignment) for a in parsed.assignments),
    )
    group = str(parsed.group_id)
    if may_read(request, group):
        result = await groups_of(request).sync(group, sync)
    else:
        result = SyncGroupResult(_DENIED)
    values = {
        "throttle_time": 0,
        "error_code": result.error,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }
    return write_response(API_SYNC_GROUP, version, request.correlation_id, values)


async def handle_heartbeat(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_HEARTBEAT, request.api_version, request.body)
    beat = Heartbeat(
        parsed.member_id, int(parsed.generation_id), getattr(parsed, "group_instance_id", None)
    )
    group = str(parsed.group_id)
    error = groups_of(request).heartbeat(group, beat) if may_read(request, group) else _DENIED
    values = {"throttle_time": 0, "error_code": error}
    return write_response(API_HEARTBEAT, request.api_version, request.correlation_id, values)


async def handle_leave_group(request: KafkaRequest) -> list[Buffer]:
    version = request.api_version
    parsed = read_request(API_LEAVE_GROUP, version, request.body)
    if version < 3:
        leaving = [LeaveMember(parsed.member_id)]
    else:
        leaving = [
            LeaveMember(m.member_id, m.group_instance_id, getattr(m, "reason", None) or "")
            for m in parsed.members
        ]
    group = str(parsed.group_id)
    if may_read(request, group):
        result = groups_of(request).leave(group, leaving)
    else:
        result = LeaveGroupResult(_DENIED)
    error = result.error
    if version < 3 and result.members:
        error = result.members[0].error  # one member: its error is the request's
    values = {
        "throttle_time": 0,
        "error_code": error,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "error_code": m.error,
            }
            for m in result.members
        ],
    }
    return write_response(API_LEAVE_GROUP, version, request.correlation_id, values)
