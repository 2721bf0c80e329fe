"""The request's principal and authorizer, for checks that happen below the routes.

The guard (``guard.py``) sets ``Access`` for the request's task when security is on; code that
only learns the resource names deep down (the reader, which sees the topics a consumer
fetches) or that answers with a list (``GET /topics``) asks here. With security off nothing is
set and every check passes, so the data path pays one context-variable read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass

from yak.errors import (
    AuthorizationError,
    ClusterAuthorizationError,
    GroupAuthorizationError,
    TopicAuthorizationError,
)
from yak.security.acl import Operation, ResourceType
from yak.security.authorizer import Authorizer

__all__ = ["ANONYMOUS", "Access", "current_access", "require", "visible"]

#: The principal of a request with no credential (Kafka's name for it).
ANONYMOUS = "User:ANONYMOUS"

_ERRORS: dict[ResourceType, type[AuthorizationError]] = {
    ResourceType.TOPIC: TopicAuthorizationError,
    ResourceType.GROUP: GroupAuthorizationError,
    ResourceType.CLUSTER: ClusterAuthorizationError,
}


@dataclass(frozen=True, slots=True)
class Access:
    """Who is asking, the ACLs as of the request's start, and where to report a denial."""

    principal: str
    authorizer: Authorizer
    on_denied: Callable[[ResourceType, str, Operation], None]

    def allowed(self, resource: ResourceType, name: str, operation: Operation) -> bool:
        return self.authorizer.authorize(self.principal, resource, name, operation)

    def require(self, resource: ResourceType, name: str, operation: Operation) -> None:
        """Raise the typed ``*_AUTHORIZATION_FAILED`` error of the resource type if denied."""
        if not self.allowed(resource, name, operation):
            self.on_denied(resource, name, operation)
            raise _ERRORS[resource](
                f"{self.principal} is not allowed {operation} on {resource} {name!r}",
                resource_type=resource.value,
                resource_name=name,
                operation=operation.value,
            )


current_access: ContextVar[Access | None] = ContextVar("yak_access", default=None)


def require(resource: ResourceType, names: Iterable[str], operation: Operation) -> None:
    """Check every name (no-op with security off)."""
    access = current_access.get()
    if access is not None:
        for name in dict.fromkeys(names):
            access.require(resource, name, operation)


def visible(resource: ResourceType, names: Iterable[str], operation: Operation) -> list[str]:
    """The names the principal may ``operation`` (all of them with security off)."""
    access = current_access.get()
    if access is None:
        return list(names)
    return [name for name in names if access.allowed(resource, name, operation)]
