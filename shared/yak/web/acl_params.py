"""The ACL parts of a request, as both the rest-proxy's security API and the coordinator's
security writes read them: a binding from a body, a filter from the query."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from yak.api.security import AclBody
from yak.errors import InvalidRequestError
from yak.security.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType

__all__ = ["acl_binding", "acl_filter"]


def acl_binding(body: AclBody) -> AclBinding:
    """The binding ``body`` describes; 400 ``INVALID_REQUEST`` when it describes none."""
    try:
        return body.to_binding()
    except ValueError as exc:
        raise InvalidRequestError(f"invalid ACL: {exc}") from None


def acl_filter(
    principal: Annotated[str | None, Query(max_length=260)] = None,
    resource_type: ResourceType | None = None,
    resource_name: Annotated[str | None, Query(max_length=249)] = None,
    pattern_type: PatternType | None = None,
    operation: Operation | None = None,
    permission: Permission | None = None,
) -> AclFilter:
    """The ACL filter of a list or remove request (a FastAPI dependency): each given field
    must match exactly; none given matches every binding."""
    return AclFilter(principal, resource_type, resource_name, pattern_type, operation, permission)
