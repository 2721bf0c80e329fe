"""The authorizer: may this principal perform this operation on this resource? (pure)

Kafka's ``AclAuthorizer`` rules, over an immutable set of bindings:

1. A super-user may do anything.
2. A DENY binding that matches (principal or ``User:*``, the resource by its pattern, the
   operation or ALL) wins over every ALLOW.
3. Otherwise a matching ALLOW grants; an operation also counts as allowed when an operation
   that implies it is allowed: READ, WRITE, DELETE and ALTER imply DESCRIBE, ALTER_CONFIGS
   implies DESCRIBE_CONFIGS (a DENY of DESCRIBE still wins).
4. No matching ALLOW: denied.

Built once per change of the ACLs (``SecurityStore`` rebuilds it from its watch) and then only
read, so any number of tasks may call it at once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from yak.security.acl import (
    ANY_PRINCIPAL,
    AclBinding,
    Operation,
    Permission,
    ResourceType,
)

__all__ = ["IMPLIED_BY", "Authorizer"]

#: For an operation, the other operations whose ALLOW also allows it.
IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}


class Authorizer:
    """Decides requests from a set of ACL bindings and the super-users (``User:<name>``)."""

    def __init__(self, acls: Iterable[AclBinding] = (), super_users: Iterable[str] = ()) -> None:
        self.super_users = frozenset(super_users)
        self._by_key: dict[tuple[str, ResourceType], list[AclBinding]] = defaultdict(list)
        for acl in acls:
            self._by_key[(acl.principal, acl.resource_type)].append(acl)

    def authorize(
        self, principal: str, resource_type: ResourceType, name: str, operation: Operation
    ) -> bool:
        """Whether ``principal`` may perform ``operation`` on the named resource."""
        if principal in self.super_users:
            return True
        matching = [
            acl
            for who in (principal, ANY_PRINCIPAL)
            for acl in self._by_key.get((who, resource_type), ())
            if acl.matches_name(name)
        ]
        if any(
            acl.permission is Permission.DENY and acl.operation in (operation, Operation.ALL)
            for acl in matching
        ):
            return False
        granting = {operation, Operation.ALL} | IMPLIED_BY.get(operation, frozenset())
        return any(
            acl.permission is Permission.ALLOW and acl.operation in granting for acl in matching
        )

    def filter(
        self,
        principal: str,
        resource_type: ResourceType,
        names: Iterable[str],
        operation: Operation,
    ) -> list[str]:
        """The names among ``names`` that ``principal`` may ``operation`` (order kept)."""
        return [n for n in names if self.authorize(principal, resource_type, n, operation)]
