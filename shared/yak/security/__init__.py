"""Yak's security model: principals, credentials, ACLs and the authorizer (docs/security.md).

Pure values and rules (``acl``, ``authorizer``, ``credentials``) plus the etcd side:
``SecurityStore`` writes users, keys and ACLs; ``SecurityCache`` follows them with a watch and
authenticates credentials. The services enforce; this package only decides.

Importing the package costs nothing: each name is loaded from its module on first use (PEP 562),
so a client that needs only the ACL values (the SDK, the CLI) imports neither the argon2 hasher
nor the etcd side.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from yak.security.acl import (
        ANY_PRINCIPAL,
        CLUSTER_NAME,
        WILDCARD,
        AclBinding,
        AclFilter,
        Operation,
        PatternType,
        Permission,
        ResourceType,
        user_name,
        user_principal,
    )
    from yak.security.authorizer import (
        IMPLIED_BY,
        Authorizer,
    )
    from yak.security.cache import (
        SecurityCache,
    )
    from yak.security.credentials import (
        ApiKeyToken,
        StoredKey,
        UserRecord,
        hash_secret,
        new_api_key,
        parse_api_key,
        verify_secret,
    )
    from yak.security.store import (
        NewApiKey,
        SecurityStore,
    )

__all__ = [
    "ANY_PRINCIPAL",
    "CLUSTER_NAME",
    "IMPLIED_BY",
    "WILDCARD",
    "AclBinding",
    "AclFilter",
    "ApiKeyToken",
    "Authorizer",
    "NewApiKey",
    "Operation",
    "PatternType",
    "Permission",
    "ResourceType",
    "SecurityCache",
    "SecurityStore",
    "StoredKey",
    "UserRecord",
    "hash_secret",
    "new_api_key",
    "parse_api_key",
    "user_name",
    "user_principal",
    "verify_secret",
]

_MODULE_OF: dict[str, str] = {
    "ANY_PRINCIPAL": "yak.security.acl",
    "CLUSTER_NAME": "yak.security.acl",
    "WILDCARD": "yak.security.acl",
    "AclBinding": "yak.security.acl",
    "AclFilter": "yak.security.acl",
    "Operation": "yak.security.acl",
    "PatternType": "yak.security.acl",
    "Permission": "yak.security.acl",
    "ResourceType": "yak.security.acl",
    "user_name": "yak.security.acl",
    "user_principal": "yak.security.acl",
    "IMPLIED_BY": "yak.security.authorizer",
    "Authorizer": "yak.security.authorizer",
    "SecurityCache": "yak.security.cache",
    "ApiKeyToken": "yak.security.credentials",
    "StoredKey": "yak.security.credentials",
    "UserRecord": "yak.security.credentials",
    "hash_secret": "yak.security.credentials",
    "new_api_key": "yak.security.credentials",
    "parse_api_key": "yak.security.credentials",
    "verify_secret": "yak.security.credentials",
    "NewApiKey": "yak.security.store",
    "SecurityStore": "yak.security.store",
}


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'yak.security' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
