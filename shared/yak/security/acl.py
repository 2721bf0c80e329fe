"""Principals and ACL bindings, in Kafka's vocabulary (``kafka-acls``).

A binding says: *principal* is ALLOWed or DENYed *operation* on the resources of *type* whose
name matches *pattern*. Patterns are LITERAL (the exact name; the literal ``*`` matches every
name) or PREFIXED (every name starting with it). A principal is ``User:<name>``; ``User:*``
matches every authenticated user.

Stored in etcd as JSON at ``security/acls/<acl-id>`` where the id is a hash of the binding's
fields, so adding the same binding twice is one key, and removing it needs no look-up.
Values only: nothing here does I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "ANY_PRINCIPAL",
    "CLUSTER_NAME",
    "WILDCARD",
    "AclBinding",
    "AclFilter",
    "Operation",
    "PatternType",
    "Permission",
    "ResourceType",
    "user_name",
    "user_principal",
]

#: The principal matching every authenticated user, and the literal name matching every name.
ANY_PRINCIPAL = "User:*"
WILDCARD = "*"

_USER = re.compile(r"User:([a-zA-Z0-9._-]{1,249})")


class ResourceType(StrEnum):
    """What an ACL protects."""

    TOPIC = "TOPIC"
    GROUP = "GROUP"
    CLUSTER = "CLUSTER"


class PatternType(StrEnum):
    """How a binding's resource name matches names."""

    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Operation(StrEnum):
    """What a request does to a resource (Kafka's ``AclOperation``)."""

    ALL = "ALL"
    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DELETE = "DELETE"
    ALTER = "ALTER"
    DESCRIBE = "DESCRIBE"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    ALTER_CONFIGS = "ALTER_CONFIGS"


class Permission(StrEnum):
    """Whether a binding grants or forbids."""

    ALLOW = "ALLOW"
    DENY = "DENY"


#: The cluster is one resource; its ACLs name it so (as Kafka's ``kafka-cluster``).
CLUSTER_NAME = "yak-cluster"


def user_principal(name: str) -> str:
    """``User:<name>`` for a user name."""
    return f"User:{name}"


def user_name(principal: str) -> str:
    """The user name of ``User:<name>``; ValueError for anything else (``User:*`` included)."""
    match = _USER.fullmatch(principal)
    if match is None or match.group(1) in (".", ".."):
        raise ValueError(f"invalid principal {principal!r}: use User:<1-249 of [a-zA-Z0-9._-]>")
    return match.group(1)


def _valid_principal(principal: str) -> str:
    if principal != ANY_PRINCIPAL:
        user_name(principal)
    return principal


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: principal, resource pattern, operation and permission."""

    principal: str
    resource_type: ResourceType
    resource_name: str
    operation: Operation
    permission: Permission = Permission.ALLOW
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        _valid_principal(self.principal)
        if not self.resource_name or len(self.resource_name) > 249:
            raise ValueError("an ACL's resource name must be 1-249 characters")
        if self.pattern_type is PatternType.PREFIXED and self.resource_name == WILDCARD:
            raise ValueError("a PREFIXED pattern cannot be '*' (use LITERAL '*')")

    @property
    def acl_id(self) -> str:
        """A stable id from the fields: the same binding always has the same key."""
        fields = (self.principal, self.resource_type, self.pattern_type, self.resource_name)
        text = "\x00".join((*fields, self.operation, self.permission))
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def matches_name(self, name: str) -> bool:
        """Whether this binding's pattern covers resource ``name``."""
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (WILDCARD, name)

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "principal": self.principal,
                "resource_type": self.resource_type.value,
                "resource_name": self.resource_name,
                "pattern_type": self.pattern_type.value,
                "operation": self.operation.value,
                "permission": self.permission.value,
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> AclBinding:
        """Parse a stored binding; ValueError (or KeyError) for a malformed one."""
        raw = json.loads(data)
        return cls(
            principal=str(raw["principal"]),
            resource_type=ResourceType(raw["resource_type"]),
            resource_name=str(raw["resource_name"]),
            pattern_type=PatternType(raw["pattern_type"]),
            operation=Operation(raw["operation"]),
            permission=Permission(raw["permission"]),
        )


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Selects bindings for listing and removal; a None field matches anything.

    Fields compare exactly (as Kafka's ``AclBindingFilter`` with MATCH off): the filter
    ``resource_name="orders"`` selects the bindings written for ``orders``, not a prefixed
    binding that happens to cover it.
    """

    principal: str | None = None
    resource_type: ResourceType | None = None
    resource_name: str | None = None
    pattern_type: PatternType | None = None
    operation: Operation | None = None
    permission: Permission | None = None

    def matches(self, acl: AclBinding) -> bool:
        pairs = (
            (self.principal, acl.principal),
            (self.resource_type, acl.resource_type),
            (self.resource_name, acl.resource_name),
            (self.pattern_type, acl.pattern_type),
            (self.operation, acl.operation),
            (self.permission, acl.permission),
        )
        return all(wanted is None or wanted == actual for wanted, actual in pairs)
