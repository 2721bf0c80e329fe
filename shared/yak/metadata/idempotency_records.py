"""The record of a request sent with an ``Idempotency-Key``, as the rest-proxies share it in etcd.

Key: ``/yak/<cluster>/idempotency/<sha256 hex of principal NUL key>`` (``idempotency_key``): the
client's key is hashed with its principal, so two principals never share a record and a key's
text (up to 255 characters of the client's choosing) never becomes part of an etcd key.

Value: JSON ``{"fingerprint": <sha256 hex of the request>, "state": "pending" | "done",
"deadline_ms": <int>, "status": <int>, "media_type": <str>, "body": <base64 of the zlib-
compressed answer>}`` (produce answers repeat themselves record after record: ten thousand
results fit well inside etcd's 1.5 MiB value limit). A *pending*
record is written (create-if-absent) before the request's work starts and names, in
``deadline_ms`` (wall clock), when the proxy doing it gives up at the latest: past it, the
proxy died and another may take the key over (a compare on the record's mod revision). A
*done* record holds the answer to replay: its status, media type and body. Every record is
written under a lease, so etcd forgets it after the idempotency window; nothing else deletes
it, except the proxy that wrote a pending record and then refused the request before sending
anything (so a corrected retry is not blocked).
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from dataclasses import dataclass
from typing import Literal

import orjson

from yak.metadata.keyspace import Keyspace

__all__ = ["IdempotencyRecord", "idempotency_key", "idempotency_prefix"]


def idempotency_prefix(keyspace: Keyspace) -> str:
    """Where every idempotency record of the cluster lives."""
    return f"{keyspace.root}idempotency/"


def idempotency_key(keyspace: Keyspace, principal: str, key: str) -> str:
    """The etcd key of ``principal``'s ``Idempotency-Key`` ``key``."""
    digest = hashlib.sha256(f"{principal}\0{key}".encode()).hexdigest()
    return f"{idempotency_prefix(keyspace)}{digest}"


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """One key's state; see the module docstring."""

    fingerprint: str
    state: Literal["pending", "done"]
    deadline_ms: int = 0
    status: int = 0
    media_type: str = ""
    body: bytes = b""

    @classmethod
    def pending(cls, fingerprint: str, deadline_ms: int) -> IdempotencyRecord:
        return cls(fingerprint, "pending", deadline_ms=deadline_ms)

    @classmethod
    def done(cls, fingerprint: str, status: int, media_type: str, body: bytes) -> IdempotencyRecord:
        return cls(fingerprint, "done", status=status, media_type=media_type, body=body)

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "fingerprint": self.fingerprint,
                "state": self.state,
                "deadline_ms": self.deadline_ms,
                "status": self.status,
                "media_type": self.media_type,
                "body": base64.b64encode(zlib.compress(self.body, 1)).decode("ascii"),
            }
        )

    @classmethod
    def decode(cls, raw: bytes) -> IdempotencyRecord:
        """The record in ``raw``; ValueError if it is not one."""
        try:
            data = orjson.loads(raw)
            state = data["state"]
            if state not in ("pending", "done"):
                raise ValueError(f"unknown state {state!r}")
            return cls(
                fingerprint=str(data["fingerprint"]),
                state=state,
                deadline_ms=int(data["deadline_ms"]),
                status=int(data["status"]),
                media_type=str(data["media_type"]),
                body=zlib.decompress(base64.b64decode(data["body"], validate=True)),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, zlib.error) as exc:
            raise ValueError(f"not an idempotency record: {exc}") from exc
