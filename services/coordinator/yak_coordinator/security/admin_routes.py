"""The security admin routes of the coordinator (``/admin/v1/security``): the writes only.

A rest-proxy serves the public security API (users, API keys, passwords, ACLs, quotas), but in
secure mode its etcd user may not write ``security/`` (``yak.etcd_auth``): a compromised proxy
must not be able to make itself a super-user. So, as Kafka's REST proxy sends CreateAcls and
AlterUserScramCredentials to the controller, the proxy authenticates and authorizes its caller,
then sends the change here with the caller's credential; this router makes the same
``SecurityStore`` / ``QuotaStore`` call the proxy used to make and answers with its result and
the etcd revision of the write, which the proxy waits for in its own cache before answering
(read-your-writes). Reads stay on the proxies (their caches and etcd reads).

These routes sit under ``/admin/v1`` like the rest, so a standby forwards them to the active
controller (``forwarding.ControllerForwarding``): one writer and one audit trail, and nothing
new to reason about. The stores themselves are safe with several writers (every change of a
user is a compare-and-swap), so the choice is about simplicity, not correctness. With security
on, the admin guard checks the caller again (CLUSTER ALTER, ``route_acls``) and audits it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, status

from yak.api.admin import ADMIN_PREFIX
from yak.api.security import (
    AclBody,
    AclList,
    ApiKeyCreated,
    CreateApiKeyRequest,
    CreateUserRequest,
    PasswordRequest,
    QuotaBody,
)
from yak.api.security_admin import (
    AclsWritten,
    KeyWritten,
    SecurityWritten,
    UserWritten,
)
from yak.metadata.keyspace import Keyspace
from yak.security.acl import AclFilter
from yak.security.quota_store import QuotaConfig, QuotaStore
from yak.security.store import NewApiKey, SecurityStore
from yak.security.user_view import user_info
from yak.web.acl_params import acl_binding, acl_filter
from yak_coordinator.service import Coordinator

__all__ = ["security_admin_router"]

#: An ACL change of ``MAX_ACLS_PER_CHANGE`` bindings fits with room to spare.
_BODY_LIMIT = 1024 * 1024


def _key(made: NewApiKey) -> ApiKeyCreated:
    return ApiKeyCreated(user=made.user, key_id=made.key_id, api_key=made.token)


def security_admin_router(coordinator: Coordinator) -> APIRouter:
    """The security write routes of one coordinator."""
    router = APIRouter(
        prefix=f"{ADMIN_PREFIX}/security", tags=["security admin"], max_body_size=_BODY_LIMIT
    )
    keyspace = Keyspace(coordinator.settings.cluster_id)

    def users() -> SecurityStore:
        # Made per request: the etcd connection comes up in the background (503 until then).
        return SecurityStore(coordinator.store, keyspace)

    def quotas() -> QuotaStore:
        return QuotaStore(coordinator.store, keyspace)

    @router.post("/users", status_code=status.HTTP_201_CREATED)
    async def create_user(body: CreateUserRequest) -> UserWritten:
        record, made, revision = await users().create_user(
            body.name, password=body.password, with_key=body.api_key
        )
        api_key = None if made is None else _key(made)
        return UserWritten(user=user_info(record), api_key=api_key, revision=revision)

    @router.delete("/users/{user}")
    async def delete_user(user: str) -> SecurityWritten:
        return SecurityWritten(revision=await users().delete_user(user))

    @router.post("/users/{user}/keys", status_code=status.HTTP_201_CREATED)
    async def add_key(user: str, body: CreateApiKeyRequest) -> KeyWritten:
        made = await users().add_key(user, body.description)
        return KeyWritten(api_key=_key(made), revision=made.revision)

    @router.delete("/users/{user}/keys/{key_id}")
    async def revoke_key(user: str, key_id: str) -> SecurityWritten:
        return SecurityWritten(revision=await users().revoke_key(user, key_id))

    @router.put("/users/{user}/password")
    async def set_password(user: str, body: PasswordRequest) -> SecurityWritten:
        return SecurityWritten(revision=await users().set_password(user, body.password))

    @router.post("/acls", status_code=status.HTTP_201_CREATED)
    async def add_acls(body: AclList) -> AclsWritten:
        """Add bindings (one that exists already is left as it is)."""
        acls = [acl_binding(acl) for acl in body.acls]
        revision = await users().add_acls(acls) if acls else 0
        return AclsWritten(acls=[AclBody.of(a) for a in acls], revision=revision)

    @router.delete("/acls")
    async def remove_acls(selected: Annotated[AclFilter, Depends(acl_filter)]) -> AclsWritten:
        """Remove every binding the filter selects (no filter: all of them); list them."""
        removed, revision = await users().remove_acls(selected)
        return AclsWritten(acls=[AclBody.of(a) for a in removed], revision=revision)

    @router.put("/quotas/{principal}")
    async def set_quota(principal: str, body: QuotaBody) -> SecurityWritten:
        quota = QuotaConfig(body.produce_bytes_per_s, body.fetch_bytes_per_s)
        return SecurityWritten(revision=await quotas().put(principal, quota))

    @router.delete("/quotas/{principal}")
    async def delete_quota(principal: str) -> SecurityWritten:
        return SecurityWritten(revision=await quotas().delete(principal))

    return router
