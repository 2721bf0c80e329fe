"""The native security admin API: ``/api/v1/security/users`` and ``/api/v1/security/acls``.

Thin handlers over ``yak.security.SecurityStore`` (etcd). They work whether security is on or
off, so users and ACLs can be prepared before the switch is thrown; with it on, they need
CLUSTER ALTER (listing: CLUSTER DESCRIBE), see ``route_acls``. After a write, the handler waits
until this proxy's security cache reflects it, so the client's next request here already uses
the new key or ACL (other proxies follow their watch within milliseconds). Every change is
written to the audit log.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from yak.api.records import API_PREFIX
from yak.api.security import (
    AclBody,
    AclList,
    ApiKeyCreated,
    ApiKeyInfo,
    CreateApiKeyRequest,
    CreateUserRequest,
    PasswordRequest,
    UserCreated,
    UserInfo,
    UserList,
    WhoAmI,
)
from yak.errors import InvalidRequestError
from yak.security.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from yak.security.audit import audit
from yak.security.credentials import UserRecord
from yak.security.store import NewApiKey
from yak_rest_proxy.http.body import openapi_body, parse_model, read_body
from yak_rest_proxy.http.responses import json_response
from yak_rest_proxy.runtime import ProxyRuntime
from yak_rest_proxy.security.access import current_access
from yak_rest_proxy.security.guard import ANONYMOUS, BODY_LIMIT

__all__ = ["security_router"]

SECURITY_TAG = "native security"
_JSON = "application/json"


def _user_info(record: UserRecord) -> UserInfo:
    keys = [
        ApiKeyInfo(key_id=key_id, created_ms=key.created_ms, description=key.description)
        for key_id, key in sorted(record.keys.items(), key=lambda item: item[1].created_ms)
    ]
    return UserInfo(
        name=record.name,
        principal=record.principal,
        created_ms=record.created_ms,
        has_password=record.password is not None,
        keys=keys,
    )


def _key(made: NewApiKey) -> ApiKeyCreated:
    return ApiKeyCreated(user=made.user, key_id=made.key_id, api_key=made.token)


def _binding(body: AclBody) -> AclBinding:
    try:
        return body.to_binding()
    except ValueError as exc:
        raise InvalidRequestError(f"invalid ACL: {exc}") from None


def _acl_filter(
    principal: Annotated[str | None, Query(max_length=260)] = None,
    resource_type: ResourceType | None = None,
    resource_name: Annotated[str | None, Query(max_length=249)] = None,
    pattern_type: PatternType | None = None,
    operation: Operation | None = None,
    permission: Permission | None = None,
) -> AclFilter:
    """The ACL filter of a list or remove request: each given field must match exactly."""
    return AclFilter(principal, resource_type, resource_name, pattern_type, operation, permission)


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
        return json_response(UserList(users=[_user_info(u) for u in users]), _JSON)

    @router.post(
        "/users",
        status_code=201,
        response_model=UserCreated,
        openapi_extra=openapi_body(CreateUserRequest, _JSON),
    )
    async def create_user(request: Request) -> Response:
        """Create a user; with ``api_key`` true the answer holds its first key, shown once."""
        body = parse_model(CreateUserRequest, await read_body(request, BODY_LIMIT))
        record, made, revision = await store.create_user(
            body.name, password=body.password, with_key=body.api_key
        )
        await changed(request, "/users", f"USER:{body.name}", revision)
        answer = UserCreated(user=_user_info(record), api_key=None if made is None else _key(made))
        return json_response(answer, _JSON, status_code=201)

    @router.delete("/users/{user}", status_code=204)
    async def delete_user(request: Request, user: str) -> Response:
        """Delete the user and every credential it holds (its ACLs stay)."""
        revision = await store.delete_user(user)
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
        made = await store.add_key(user, body.description)
        await changed(request, "/users/{user}/keys", f"KEY:{user}/{made.key_id}", made.revision)
        return json_response(_key(made), _JSON, status_code=201)

    @router.delete("/users/{user}/keys/{key_id}", status_code=204)
    async def revoke_key(request: Request, user: str, key_id: str) -> Response:
        """Revoke one key: the next request with it answers 401, on every proxy."""
        revision = await store.revoke_key(user, key_id)
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
        revision = await store.set_password(user, body.password)
        await changed(request, "/users/{user}/password", f"USER:{user}", revision)
        return Response(status_code=204)

    @router.get("/acls", response_model=AclList)
    async def list_acls(selected: Annotated[AclFilter, Depends(_acl_filter)]) -> Response:
        acls = await store.list_acls(selected)
        return json_response(AclList(acls=[AclBody.of(a) for a in acls]), _JSON)

    @router.post(
        "/acls", status_code=201, response_model=AclList, openapi_extra=openapi_body(AclList, _JSON)
    )
    async def add_acls(request: Request) -> Response:
        """Add bindings (one that exists already is left as it is)."""
        body = parse_model(AclList, await read_body(request, BODY_LIMIT))
        acls = [_binding(acl) for acl in body.acls]
        revision = await store.add_acls(acls) if acls else 0
        await changed(request, "/acls", ";".join(map(_describe, acls)), revision)
        return json_response(AclList(acls=[AclBody.of(a) for a in acls]), _JSON, status_code=201)

    @router.delete("/acls", response_model=AclList)
    async def remove_acls(
        request: Request, selected: Annotated[AclFilter, Depends(_acl_filter)]
    ) -> Response:
        """Remove every binding the filter selects (no filter: all of them); list them."""
        removed, revision = await store.remove_acls(selected)
        await changed(request, "/acls", ";".join(map(_describe, removed)), revision)
        return json_response(AclList(acls=[AclBody.of(a) for a in removed]), _JSON)

    return router


def _describe(acl: AclBinding) -> str:
    return (
        f"{acl.permission} {acl.principal} {acl.operation} "
        f"{acl.resource_type}:{acl.pattern_type}:{acl.resource_name}"
    )
