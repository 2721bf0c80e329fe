"""The public form of a stored user (``GET .../users``): what the admin APIs answer, never a
hash. Built by the coordinator and the rest-proxy from the credential store's records; the API
model (``yak.api.security.UserInfo``) is the client's and imports nothing of the store."""

from __future__ import annotations

from yak.api.security import ApiKeyInfo, UserInfo
from yak.security.credentials import UserRecord

__all__ = ["user_info"]


def user_info(record: UserRecord) -> UserInfo:
    """The public form of a stored user: its keys by age, never a hash."""
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
