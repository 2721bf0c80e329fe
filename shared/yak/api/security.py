"""Bodies of the native security admin API (``/api/v1/security``): users, API keys, ACLs.

Secrets travel one way only: a password in a request, a new API key's token in the one answer
that creates it. No answer ever carries a hash or an old token.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from yak.api.json_int import ExactJsonInt
from yak.security.acl import AclBinding, Operation, PatternType, Permission, ResourceType

__all__ = [
    "AclBody",
    "AclList",
    "ApiKeyCreated",
    "ApiKeyInfo",
    "CreateApiKeyRequest",
    "CreateUserRequest",
    "PasswordRequest",
    "QuotaBody",
    "QuotaInfo",
    "QuotaList",
    "UserCreated",
    "UserInfo",
    "UserList",
    "WhoAmI",
]

_NAME = r"^[a-zA-Z0-9._-]{1,249}$"
#: A byte rate: JSON's true/false are none; at most 2**53 bytes/s, exact in every JSON reader.
_Rate = ExactJsonInt
_PRINCIPAL = r"^User:([a-zA-Z0-9._-]{1,249}|\*)$"


class _Request(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Answer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class CreateUserRequest(_Request):
    """``POST /security/users``: a user, with a password and/or a first API key."""

    name: str = Field(pattern=_NAME)
    password: str | None = Field(default=None, min_length=1, max_length=1024)
    api_key: bool = Field(
        default=True, strict=True, description="Make a first API key (shown once)."
    )


class PasswordRequest(_Request):
    """``PUT /security/users/{user}/password``: the new password (null removes it)."""

    password: str | None = Field(min_length=1, max_length=1024)


class CreateApiKeyRequest(_Request):
    """``POST /security/users/{user}/keys``: what the key is for (free text)."""

    description: str = Field(default="", max_length=200)


class ApiKeyInfo(_Answer):
    """One key of a user: its id and when it was made (never its secret)."""

    key_id: str
    created_ms: int
    description: str = ""


class UserInfo(_Answer):
    """A user: principal, whether it has a password, its keys."""

    name: str
    principal: str
    created_ms: int
    has_password: bool
    keys: list[ApiKeyInfo]


class UserList(_Answer):
    users: list[UserInfo]


class ApiKeyCreated(_Answer):
    """A new key: ``api_key`` is the bearer token, shown here once and stored nowhere."""

    user: str
    key_id: str
    api_key: str


class UserCreated(_Answer):
    user: UserInfo
    api_key: ApiKeyCreated | None = None


class AclBody(BaseModel):
    """One ACL binding (``kafka-acls`` fields)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    principal: str = Field(pattern=_PRINCIPAL, examples=["User:alice", "User:*"])
    resource_type: ResourceType
    resource_name: str = Field(min_length=1, max_length=249)
    pattern_type: PatternType = PatternType.LITERAL
    operation: Operation
    permission: Permission = Permission.ALLOW

    def to_binding(self) -> AclBinding:
        return AclBinding(
            principal=self.principal,
            resource_type=self.resource_type,
            resource_name=self.resource_name,
            operation=self.operation,
            permission=self.permission,
            pattern_type=self.pattern_type,
        )

    @classmethod
    def of(cls, acl: AclBinding) -> AclBody:
        return cls(
            principal=acl.principal,
            resource_type=acl.resource_type,
            resource_name=acl.resource_name,
            pattern_type=acl.pattern_type,
            operation=acl.operation,
            permission=acl.permission,
        )


class AclList(_Answer):
    """ACL bindings (the ones listed, created or removed)."""

    acls: list[AclBody]


class WhoAmI(_Answer):
    """The caller as the API sees it (``GET /api/v1/security/whoami``)."""

    principal: str = Field(examples=["User:alice"])
    super_user: bool = Field(description="Named in the proxy's YAK_SUPER_USERS.")
    security: bool = Field(description="False: security is off and anyone is served.")


class QuotaBody(_Request):
    """``PUT /security/quotas/{principal}``: byte rates per second (null: the proxy's default,
    0: unlimited). Enforced by each proxy on its own (docs/security.md)."""

    produce_bytes_per_s: _Rate | None = None
    fetch_bytes_per_s: _Rate | None = None


class QuotaInfo(_Answer):
    """A principal's override, and the rates this proxy applies to it (override or default)."""

    principal: str
    produce_bytes_per_s: int | None = None
    fetch_bytes_per_s: int | None = None
    effective_produce_bytes_per_s: int = 0
    effective_fetch_bytes_per_s: int = 0


class QuotaList(_Answer):
    """Every override, and this proxy's defaults (0: unlimited)."""

    default_produce_bytes_per_s: int = 0
    default_fetch_bytes_per_s: int = 0
    quotas: list[QuotaInfo] = Field(default_factory=list)
