"""Yak's security model: principals, credentials, ACLs and the authorizer (docs/security.md).

Pure values and rules (``acl``, ``authorizer``, ``credentials``) plus the etcd side:
``SecurityStore`` writes users, keys and ACLs; ``SecurityCache`` follows them with a watch and
authenticates credentials. The services enforce; this package only decides.
"""

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
from yak.security.authorizer import IMPLIED_BY, Authorizer
from yak.security.cache import SecurityCache
from yak.security.credentials import (
    ApiKeyToken,
    StoredKey,
    UserRecord,
    hash_secret,
    new_api_key,
    parse_api_key,
    verify_secret,
)
from yak.security.store import NewApiKey, SecurityStore

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
