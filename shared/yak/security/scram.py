"""SCRAM credentials and the server side of a SCRAM exchange (RFC 5802, RFC 7677), as Kafka.

A password's SCRAM credential per mechanism (``SCRAM-SHA-256``, ``SCRAM-SHA-512``) is what
Kafka keeps in ZooKeeper/KRaft: a random salt, the iteration count, and two keys derived
from the password —

    SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations)
    StoredKey      = H(HMAC-H(SaltedPassword, "Client Key"))
    ServerKey      = HMAC-H(SaltedPassword, "Server Key")

— neither of which lets anyone log in (the client's proof needs ``ClientKey``, which only
the password gives), yet together they let a server check a proof and prove itself back.
Stored in the user record (``credentials.UserRecord.scram``) as JSON, bytes in base64::

    {"salt": "...", "iterations": 4096, "stored_key": "...", "server_key": "..."}

``ScramServer`` is one exchange (two client messages, two answers), Kafka's way: no channel
binding (``n,,``; a GS2 ``a=`` authzid is accepted only when it names the user), no
extensions, a 32-byte server nonce. An unknown user gets a fake, deterministic salt so the
first answer does not tell which users exist; its exchange then fails at the proof.
Deriving a credential costs ``iterations`` HMACs (milliseconds): callers on an event loop run
``scram_credential`` in a thread. Everything else is pure and cheap.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_ITERATIONS",
    "MECHANISMS",
    "ScramCredential",
    "ScramError",
    "scram_credential",
    "scram_credentials",
]

#: Mechanism -> hashlib name.
MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Kafka's default and minimum (``kafka-configs --add-config SCRAM-SHA-256=[iterations=...]``).
DEFAULT_ITERATIONS = 4096


class ScramError(ValueError):
    """A malformed client message or a failed proof (the exchange ends)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """One mechanism's stored credential (see the module docstring)."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def to_json(self) -> dict[str, Any]:
        return {
            "salt": _b64(self.salt),
            "iterations": self.iterations,
            "stored_key": _b64(self.stored_key),
            "server_key": _b64(self.server_key),
        }

    @classmethod
    def from_json(cls, raw: Any) -> ScramCredential:
        """Parse a stored credential; ValueError, KeyError or TypeError for a malformed one."""
        iterations = int(raw["iterations"])
        if iterations < 1:
            raise ValueError(f"SCRAM iterations must be >= 1, got {iterations}")
        return cls(
            salt=base64.b64decode(raw["salt"], validate=True),
            iterations=iterations,
            stored_key=base64.b64decode(raw["stored_key"], validate=True),
            server_key=base64.b64decode(raw["server_key"], validate=True),
        )


def scram_credential(
    password: str,
    mechanism: str,
    *,
    salt: bytes | None = None,
    iterations: int = DEFAULT_ITERATIONS,
) -> ScramCredential:
    """The credential of ``password`` for ``mechanism`` (a fresh 32-byte salt by default)."""
    algorithm = MECHANISMS[mechanism]
    salt = secrets.token_bytes(32) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(algorithm, password.encode(), salt, iterations)
    client_key = _hmac(algorithm, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        iterations=iterations,
        stored_key=hashlib.new(algorithm, client_key).digest(),
        server_key=_hmac(algorithm, salted, b"Server Key"),
    )


def scram_credentials(password: str) -> dict[str, ScramCredential]:
    """A credential for every mechanism (what a password change stores)."""
    return {mechanism: scram_credential(password, mechanism) for mechanism in MECHANISMS}


def _hmac(algorithm: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, algorithm).digest()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
