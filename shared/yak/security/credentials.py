"""Users and their credentials: API keys and passwords, stored only as argon2id hashes.

An API key is the token ``yak_<key-id>_<secret>``: ``key-id`` is 16 random hex digits, public,
and names the key (so a proxy finds the one hash to check in O(1), and an operator can revoke
it); ``secret`` is 32 random bytes, url-safe base64. The token is shown once, when the key is
made; etcd holds only its argon2id hash. A user may hold several keys: rotation is "add a new
key, move the clients, revoke the old one". A password (HTTP Basic, Kafka's SASL/PLAIN) is
hashed the same way, and its SCRAM credentials (``scram``: salt, iterations, StoredKey and
ServerKey per mechanism, for Kafka's SASL/SCRAM) are stored beside the hash — written with the
password, removed with it.

The user record is the JSON value at ``security/principals/<name>``::

    {"name": "alice", "created_ms": 1700000000000, "password": "$argon2id$..." | null,
     "keys": {"<key-id>": {"hash": "$argon2id$...", "created_ms": ..., "description": "..."}},
     "scram": {"SCRAM-SHA-256": {"salt": ..., "iterations": 4096, "stored_key": ...,
               "server_key": ...}, "SCRAM-SHA-512": {...}}}

A record without ``scram`` (a password set before SCRAM existed) parses with none: its user
logs in with SASL/PLAIN until the password is set again.

Hashing and verifying are slow on purpose (tens of milliseconds, memory-hard): callers on an
event loop run them in a thread (``SecurityStore`` does).
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field, replace
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from yak.security.scram import ScramCredential

if TYPE_CHECKING:
    from argon2 import PasswordHasher

__all__ = [
    "KEY_PREFIX",
    "ApiKeyToken",
    "StoredKey",
    "UserRecord",
    "hash_secret",
    "new_api_key",
    "parse_api_key",
    "verify_secret",
]

KEY_PREFIX = "yak"
_TOKEN = re.compile(r"yak_([0-9a-f]{16})_([A-Za-z0-9_-]{20,128})")


@cache
def _default_hasher() -> PasswordHasher:
    """argon2-cffi's defaults: argon2id, 3 passes over 64 MiB, 4 lanes (RFC 9106's second
    choice). Made on first use: the records below are read by clients that never hash."""
    from argon2 import PasswordHasher

    return PasswordHasher()


class ApiKeyToken(NamedTuple):
    """An API key taken apart: its public id and its secret."""

    key_id: str
    secret: str

    @property
    def token(self) -> str:
        return f"{KEY_PREFIX}_{self.key_id}_{self.secret}"


def new_api_key() -> ApiKeyToken:
    """A fresh random key."""
    return ApiKeyToken(secrets.token_hex(8), secrets.token_urlsafe(32))


def parse_api_key(token: str) -> ApiKeyToken | None:
    """The parts of a well-formed token, or None."""
    match = _TOKEN.fullmatch(token.strip())
    return None if match is None else ApiKeyToken(match.group(1), match.group(2))


def hash_secret(secret: str, hasher: PasswordHasher | None = None) -> str:
    """The argon2id hash (PHC string, salt included) of a secret or password."""
    return (hasher or _default_hasher()).hash(secret)


def verify_secret(encoded: str, secret: str, hasher: PasswordHasher | None = None) -> bool:
    """Whether ``secret`` matches the stored hash; False for a malformed hash too."""
    from argon2.exceptions import InvalidHashError, VerificationError

    try:
        return (hasher or _default_hasher()).verify(encoded, secret)
    except (VerificationError, InvalidHashError):
        return False


@dataclass(frozen=True, slots=True)
class StoredKey:
    """One API key as stored: its hash, when it was made, and what it is for."""

    hash: str
    created_ms: int
    description: str = ""


@dataclass(frozen=True, slots=True)
class UserRecord:
    """A user and the hashes of its credentials."""

    name: str
    created_ms: int
    password: str | None = None
    keys: MappingProxyType[str, StoredKey] = field(default_factory=lambda: MappingProxyType({}))
    #: The password's SCRAM credentials by mechanism (empty without a password).
    scram: MappingProxyType[str, ScramCredential] = field(
        default_factory=lambda: MappingProxyType({})
    )

    @property
    def principal(self) -> str:
        return f"User:{self.name}"

    def with_key(self, key_id: str, key: StoredKey) -> UserRecord:
        return replace(self, keys=MappingProxyType({**self.keys, key_id: key}))

    def without_key(self, key_id: str) -> UserRecord:
        return replace(
            self, keys=MappingProxyType({k: v for k, v in self.keys.items() if k != key_id})
        )

    def to_json(self) -> bytes:
        keys = {
            key_id: {"hash": k.hash, "created_ms": k.created_ms, "description": k.description}
            for key_id, k in self.keys.items()
        }
        body: dict[str, Any] = {
            "name": self.name,
            "created_ms": self.created_ms,
            "password": self.password,
            "keys": keys,
        }
        if self.scram:
            body["scram"] = {mechanism: c.to_json() for mechanism, c in self.scram.items()}
        return json.dumps(body, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> UserRecord:
        """Parse a stored record; ValueError, KeyError or TypeError for a malformed one."""
        raw = json.loads(data)
        keys = {
            str(key_id): StoredKey(
                hash=str(k["hash"]),
                created_ms=int(k["created_ms"]),
                description=str(k.get("description", "")),
            )
            for key_id, k in dict(raw.get("keys") or {}).items()
        }
        password = raw.get("password")
        scram = {
            str(mechanism): ScramCredential.from_json(c)
            for mechanism, c in dict(raw.get("scram") or {}).items()
        }
        return cls(
            name=str(raw["name"]),
            created_ms=int(raw["created_ms"]),
            password=None if password is None else str(password),
            keys=MappingProxyType(keys),
            scram=MappingProxyType(scram),
        )
