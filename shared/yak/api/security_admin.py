"""Answers of the coordinator's security admin routes (``/admin/v1/security``).

A rest-proxy serves the public security API (``yak.api.security``) but may not write
``security/`` in etcd (its etcd user has no such right in secure mode, so a compromised proxy
cannot make itself a super-user): it authenticates and authorizes the caller, then sends the
change to the coordinator, which writes it. Each answer carries the etcd ``revision`` of the
write, so the proxy can wait until its own security cache (or quota copy) has caught up before
answering its client (read-your-writes), as it did when it wrote etcd itself. Requests reuse
the public bodies (``CreateUserRequest``, ``CreateApiKeyRequest``, ``PasswordRequest``,
``AclList``, ``QuotaBody``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from yak.api.security import AclBody, ApiKeyCreated, UserInfo

__all__ = ["AclsWritten", "KeyWritten", "SecurityWritten", "UserWritten"]


class _Answer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class SecurityWritten(_Answer):
    """A change made: the etcd revision of its write (0: nothing was written)."""

    revision: int


class UserWritten(SecurityWritten):
    """A user created, with its first API key when one was asked for (its token shown once)."""

    user: UserInfo
    api_key: ApiKeyCreated | None = None


class KeyWritten(SecurityWritten):
    """A new API key: the token is in this answer and nowhere else."""

    api_key: ApiKeyCreated


class AclsWritten(SecurityWritten):
    """ACL bindings added or removed."""

    acls: list[AclBody]
