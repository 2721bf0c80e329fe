"""The native security admin API: ``/api/v1/security/users`` and ``/api/v1/security/acls``.

Reads are answered here, from etcd (``yak.security.SecurityStore``); writes go to the active
controller's ``/admin/v1/security`` (``runtime.coordinator()``, with the caller's credential),
which makes the same store call: the proxy's etcd user may not write ``security/`` (a
compromised proxy must not make itself a super-user), as Kafka's REST proxy sends CreateAcls and
AlterUserScramCredentials to the controller. They work whether security is on or off, so users
and ACLs can be prepared before the switch is thrown; with it on, they need CLUSTER ALTER
(listing: CLUSTER DESCRIBE), see ``route_acls``. After a write, the handler waits until this
proxy's security cache reflects the revision the coordinator answered, so the client's next
request here already uses the new key or ACL (other proxies follow their watch within
milliseconds). Every change is written to the audit log.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from yak.api.records import API_PREFIX
from yak.api.security import (
    AclBody,
    AclList,
    ApiKeyCreated,
    CreateApiKeyRequest,
    CreateUserRequest,
    PasswordRequest,
    UserCreated,
    UserList,
    WhoAmI,
)
from yak.security.acl import AclBinding, AclFilter
from yak.security.audit import audit
from yak.security.store import valid_user_name
from yak.security.user_view import user_info
from yak.web.acl_params import acl_binding, acl_filter
from yak_rest_proxy.http.body import openapi_body, parse_model, read_body
from yak_rest_proxy.http.responses import json_response
from yak_rest_proxy.runtime import ProxyRuntime
from yak_rest_proxy.security.access import current_access
from yak_rest_proxy.security.guard import ANONYMOUS, BODY_LIMIT

__all__ = ["security_router"]

SECURITY_TAG = "native security"
_JSON = "application/json"


def _optional(extra: dict[str, Any]) -> dict[str, Any]:
    """An ``openapi_body`` whose body may be left out."""
    extra["requestBody"]["required"] = False
    return extra


def security_router(runtime: ProxyRuntime) -> APIRouter:
    router = APIRouter(prefix=f"{API_PREFIX}/security", tags=[SECURITY_TAG])
    store = runtime.security_store

    async def changed(request: Request, action: str, resource: str, revision: int) -> None:
        access = current_access.get()
        audit(
            principal=access.principal if access is not None else ANONYMOUS,
            action=f"{request.method} {action}",
            result="ok",
            resource=resource,
            request_id=request.headers.get("x-request-id", ""),
            remote=f"{request.client.host}:{request.client.port}" if request.client else "",
        )
        await runtime.wait_for_security(revision)

    @router.get("/whoami", response_model=WhoAmI)
    async def whoami() -> Response:
        """The caller's principal (what a console shows and maps to a role)."""
        access = current_access.get()
        if access is None:
            return json_response(
                WhoAmI(principal=ANONYMOUS, super_user=False, security=False), _JSON
            )
        answer = WhoAmI(
            principal=access.principal,
            super_user=access.principal in access.authorizer.super_users,
            security=True,
        )
        return json_response(answer, _JSON)

    @router.get("/users", response_model=UserList)
    async def list_users() -> Response:
        users = sorted(await store.list_users(), key=lambda record: record.name)
        return json_response(UserList(users=[user_info(u) for u in users]), _JSON)

    @router.post(
        "/users",
        status_code=201,
        response_model=UserCreated,
        openapi_extra=openapi_body(CreateUserRequest, _JSON),
    )
    async def create_user(request: Request) -> Response:
        """Create a user; with ``api_key`` true the answer holds its first key, shown once."""
        body = parse_model(CreateUserRequest, await read_body(request, BODY_LIMIT))
        made = await runtime.coordinator().create_user(
            body.name, password=body.password, api_key=body.api_key
        )
        await changed(request, "/users", f"USER:{body.name}", made.revision)
        answer = UserCreated(user=made.user, api_key=made.api_key)
        return json_response(answer, _JSON, status_code=201)

    @router.delete("/users/{user}", status_code=204)
    async def delete_user(request: Request, user: str) -> Response:
        """Delete the user and every credential it holds (its ACLs stay)."""
        revision = (await runtime.coordinator().delete_user(valid_user_name(user))).revision
        await changed(request, "/users/{user}", f"USER:{user}", revision)
        return Response(status_code=204)

    @router.post(
        "/users/{user}/keys",
        status_code=201,
        response_model=ApiKeyCreated,
        openapi_extra=_optional(openapi_body(CreateApiKeyRequest, _JSON)),
    )
    async def add_key(request: Request, user: str) -> Response:
        """A new API key for the user: the token is in this answer and nowhere else."""
        raw = await read_body(request, BODY_LIMIT)
        body = parse_model(CreateApiKeyRequest, raw, empty_ok=True)
        made = await runtime.coordinator().add_key(valid_user_name(user), body.description)
        key = made.api_key
        await changed(request, "/users/{user}/keys", f"KEY:{user}/{key.key_id}", made.revision)
        return json_response(key, _JSON, status_code=201)

    @router.delete("/users/{user}/keys/{key_id}", status_code=204)
    async def revoke_key(request: Request, user: str, key_id: str) -> Response:
        """Revoke one key: the next request with it answers 401, on every proxy."""
        revision = (await runtime.coordinator().revoke_key(valid_user_name(user), key_id)).revision
        await changed(request, "/users/{user}/keys/{key_id}", f"KEY:{user}/{key_id}", revision)
        return Response(status_code=204)

    @router.put(
        "/users/{user}/password",
        status_code=204,
        openapi_extra=openapi_body(PasswordRequest, _JSON),
    )
    async def set_password(request: Request, user: str) -> Response:
        """Set the user's HTTP Basic password (null removes it)."""
        body = parse_model(PasswordRequest, await read_body(request, BODY_LIMIT))
        revision = (
            await runtime.coordinator().set_password(valid_user_name(user), body.password)
        ).revision
        await changed(request, "/users/{user}/password", f"USER:{user}", revision)
        return Response(status_code=204)

    @router.get("/acls", response_model=AclList)
    async def list_acls(selected: Annotated[AclFilter, Depends(acl_filter)]) -> Response:
        acls = await store.list_acls(selected)
        return json_response(AclList(acls=[AclBody.of(a) for a in acls]), _JSON)

    @router.post(
        "/acls", status_code=201, response_model=AclList, openapi_extra=openapi_body(AclList, _JSON)
    )
    async def add_acls(request: Request) -> Response:
        """Add bindings (one that exists already is left as it is)."""
        body = parse_model(AclList, await read_body(request, BODY_LIMIT))
        acls = [acl_binding(acl) for acl in body.acls]
        revision = (await runtime.coordinator().add_acls(acls)).revision if acls else 0
        await changed(request, "/acls", ";".join(map(_describe, acls)), revision)
        return json_response(AclList(acls=[AclBody.of(a) for a in acls]), _JSON, status_code=201)

    @router.delete("/acls", response_model=AclList)
    async def remove_acls(
        request: Request, selected: Annotated[AclFilter, Depends(acl_filter)]
    ) -> Response:
        """Remove every binding the filter selects (no filter: all of them); list them."""
        removed = await runtime.coordinator().remove_acls(selected)
        described = ";".join(map(_describe, (acl_binding(a) for a in removed.acls)))
        await changed(request, "/acls", described, removed.revision)
        return json_response(AclList(acls=removed.acls), _JSON)

    return router


def _describe(acl: AclBinding) -> str:
    return (
        f"{acl.permission} {acl.principal} {acl.operation} "
        f"{acl.resource_type}:{acl.pattern_type}:{acl.resource_name}"
    )
