"""``yak users`` and ``yak acls``: users, API keys, passwords and ACLs (like kafka-acls).

Every command is a request to the rest-proxy's security admin API (``/api/v1/security``) with
``--api-key`` (or ``YAK_API_KEY``); the key's user needs CLUSTER ALTER (listing: DESCRIBE) or
must be a super-user. The first user of a secured cluster has no key to ask with:
``yak users create admin --bootstrap --etcd URL --cluster-id ID`` writes it straight to etcd
(as ``kafka-configs --zookeeper`` did), and the proxies list it in ``YAK_SUPER_USERS``.
A new API key is printed once; nothing can show it again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, TypeVar

import typer
from pydantic import BaseModel

from yak.api.security import (
    AclBody,
    AclList,
    ApiKeyCreated,
    CreateApiKeyRequest,
    CreateUserRequest,
    PasswordRequest,
    UserCreated,
    UserList,
)
from yak.cli.cluster import DataDirOption
from yak.cli.proxy import ApiKeyOption, UrlOption, proxy_url, run_or_exit
from yak.cli.secure import cluster_api_key
from yak.clients._http import segment
from yak.metadata.keyspace import Keyspace
from yak.sdk._client import ApiClient, Params
from yak.security.acl import Operation, PatternType, Permission, ResourceType

__all__ = ["acls", "users"]

users = typer.Typer(no_args_is_help=True, help="Create and delete users; add and revoke keys.")
acls = typer.Typer(no_args_is_help=True, help="Add, list and remove ACLs.")

_DATA_DIR = Path(".yak")
_TIMEOUT_S = 30.0
_M = TypeVar("_M", bound=BaseModel)


def _client(url: str | None, data_dir: Path, api_key: str | None) -> ApiClient:
    target = proxy_url(url, data_dir)
    return ApiClient(target, timeout_s=_TIMEOUT_S, api_key=cluster_api_key(api_key, data_dir))


def _print_key(key: ApiKeyCreated) -> None:
    typer.echo(f"API key for {key.user} (id {key.key_id}), shown once:")
    typer.echo(key.api_key)


async def _bootstrap(etcd: str, cluster_id: str, name: str, password: str | None) -> None:
    # etcd's client and the credential store are the server stack's (issue 31): loaded here,
    # where a first user is bootstrapped straight into etcd, not for every client command.
    from yak.metadata.etcd_store import EtcdMetadataStore
    from yak.security.store import SecurityStore

    store = EtcdMetadataStore.from_url(etcd)
    try:
        _, key, _ = await SecurityStore(store, Keyspace(cluster_id)).create_user(
            name, password=password, with_key=True
        )
    finally:
        await store.aclose()
    assert key is not None
    _print_key(ApiKeyCreated(user=key.user, key_id=key.key_id, api_key=key.token))


@users.command("create")
def create(
    name: str,
    password: Annotated[str | None, typer.Option(help="An HTTP Basic password too.")] = None,
    key: Annotated[bool, typer.Option("--key/--no-key", help="Make a first API key.")] = True,
    bootstrap: Annotated[
        bool, typer.Option("--bootstrap", help="Write straight to etcd (the first super-user).")
    ] = False,
    etcd: Annotated[str, typer.Option(envvar="YAK_ETCD")] = "http://127.0.0.1:2379",
    cluster_id: Annotated[str, typer.Option(envvar="YAK_CLUSTER_ID")] = "local",
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Create a user; its first API key is printed once."""
    if bootstrap:
        run_or_exit(_bootstrap(etcd, cluster_id, name, password))
        return

    async def run() -> UserCreated:
        request = CreateUserRequest(name=name, password=password, api_key=key)
        client = _client(url, data_dir, api_key)
        try:
            return await client.call("POST", "/security/users", UserCreated, request)
        finally:
            await client.aclose()

    created = run_or_exit(run())
    typer.echo(f"created {created.user.principal}")
    if created.api_key is not None:
        _print_key(created.api_key)


@users.command("list")
def list_users(
    url: UrlOption = None, api_key: ApiKeyOption = None, data_dir: DataDirOption = _DATA_DIR
) -> None:
    """Every user, whether it has a password, and its key ids."""
    listed = _call(url, data_dir, api_key, "GET", "/security/users", UserList)
    for user in listed.users:
        keys = ", ".join(k.key_id for k in user.keys) or "-"
        typer.echo(
            f"{user.principal}  password: {'yes' if user.has_password else 'no'}  keys: {keys}"
        )


@users.command("delete")
def delete(
    name: str,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Delete a user and all its credentials (its ACLs stay)."""
    _call_empty(url, data_dir, api_key, "DELETE", f"/security/users/{segment(name)}")
    typer.echo(f"deleted User:{name}")


@users.command("add-key")
def add_key(
    name: str,
    description: Annotated[str, typer.Option(help="What the key is for.")] = "",
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """A new API key for the user (rotation: add a key, move clients, revoke the old one)."""
    body = CreateApiKeyRequest(description=description)
    made = _call(
        url, data_dir, api_key, "POST", f"/security/users/{segment(name)}/keys", ApiKeyCreated, body
    )
    _print_key(made)


@users.command("revoke-key")
def revoke_key(
    name: str,
    key_id: str,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Revoke one API key: it stops working at once on every proxy."""
    _call_empty(
        url, data_dir, api_key, "DELETE", f"/security/users/{segment(name)}/keys/{segment(key_id)}"
    )
    typer.echo(f"revoked key {key_id} of User:{name}")


@users.command("set-password")
def set_password(
    name: str,
    password: Annotated[str, typer.Option(prompt=True, hide_input=True)],
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Set the user's HTTP Basic password."""
    body = PasswordRequest(password=password)
    _call_empty(url, data_dir, api_key, "PUT", f"/security/users/{segment(name)}/password", body)
    typer.echo(f"password of User:{name} set")


PrincipalOption = Annotated[str | None, typer.Option(help="User:<name> or User:*.")]
TypeOption = Annotated[ResourceType | None, typer.Option("--resource-type", "-t")]
NameOption = Annotated[str | None, typer.Option("--resource-name", "-n")]
PatternOption = Annotated[PatternType | None, typer.Option("--pattern-type")]
OperationOption = Annotated[Operation | None, typer.Option("--operation", "-o")]
PermissionOption = Annotated[Permission | None, typer.Option("--permission")]


def _filter_params(
    principal: str | None,
    resource_type: ResourceType | None,
    resource_name: str | None,
    pattern_type: PatternType | None,
    operation: Operation | None,
    permission: Permission | None,
) -> dict[str, str]:
    fields = {
        "principal": principal,
        "resource_type": resource_type,
        "resource_name": resource_name,
        "pattern_type": pattern_type,
        "operation": operation,
        "permission": permission,
    }
    return {key: str(value) for key, value in fields.items() if value is not None}


def _print_acls(listed: AclList, verb: str) -> None:
    for acl in listed.acls:
        typer.echo(
            f"{verb}{acl.permission} {acl.principal} {acl.operation} "
            f"{acl.resource_type} {acl.pattern_type} {acl.resource_name}"
        )


@acls.command("add")
def add(
    principal: Annotated[str, typer.Option(help="User:<name> or User:*.")],
    resource_type: Annotated[ResourceType, typer.Option("--resource-type", "-t")],
    resource_name: Annotated[str, typer.Option("--resource-name", "-n", help="'*' = any.")],
    operation: Annotated[list[Operation], typer.Option("--operation", "-o", help="Repeatable.")],
    pattern_type: Annotated[PatternType, typer.Option("--pattern-type")] = PatternType.LITERAL,
    deny: Annotated[bool, typer.Option("--deny", help="A DENY binding (deny wins).")] = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Add one binding per operation."""
    permission = Permission.DENY if deny else Permission.ALLOW
    body = AclList(
        acls=[
            AclBody(
                principal=principal,
                resource_type=resource_type,
                resource_name=resource_name,
                pattern_type=pattern_type,
                operation=op,
                permission=permission,
            )
            for op in operation
        ]
    )
    _print_acls(_call(url, data_dir, api_key, "POST", "/security/acls", AclList, body), "added ")


@acls.command("list")
def list_acls(
    principal: PrincipalOption = None,
    resource_type: TypeOption = None,
    resource_name: NameOption = None,
    pattern_type: PatternOption = None,
    operation: OperationOption = None,
    permission: PermissionOption = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """The bindings matching every given field."""
    params = _filter_params(
        principal, resource_type, resource_name, pattern_type, operation, permission
    )
    _print_acls(_call(url, data_dir, api_key, "GET", "/security/acls", AclList, params=params), "")


@acls.command("remove")
def remove(
    principal: PrincipalOption = None,
    resource_type: TypeOption = None,
    resource_name: NameOption = None,
    pattern_type: PatternOption = None,
    operation: OperationOption = None,
    permission: PermissionOption = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Remove the bindings matching every given field (at least one field is required)."""
    params = _filter_params(
        principal, resource_type, resource_name, pattern_type, operation, permission
    )
    if not params:
        raise typer.BadParameter("give at least one filter (removing every ACL is refused)")
    removed = _call(url, data_dir, api_key, "DELETE", "/security/acls", AclList, params=params)
    _print_acls(removed, "removed ")


def _call(
    url: str | None,
    data_dir: Path,
    api_key: str | None,
    method: str,
    path: str,
    model: type[_M],
    body: BaseModel | None = None,
    *,
    params: Params | None = None,
) -> _M:
    async def run() -> _M:
        client = _client(url, data_dir, api_key)
        try:
            return await client.call(method, path, model, body, params=params)
        finally:
            await client.aclose()

    return run_or_exit(run())


def _call_empty(
    url: str | None,
    data_dir: Path,
    api_key: str | None,
    method: str,
    path: str,
    body: BaseModel | None = None,
) -> None:
    async def run() -> None:
        client = _client(url, data_dir, api_key)
        try:
            await client.call_empty(method, path, body)
        finally:
            await client.aclose()

    run_or_exit(run())
