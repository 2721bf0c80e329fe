"""The server side of one SCRAM exchange (RFC 5802 §5, RFC 7677), as Kafka's brokers do it.

    client-first  n,,n=<user>,r=<client nonce>[,<extension>...]
    server-first  r=<client nonce><server nonce>,s=<salt, base64>,i=<iterations>
    client-final  c=biws,r=<nonce>[,<extension>...],p=<ClientProof, base64>
    server-final  v=<ServerSignature, base64>

With ``AuthMessage = client-first-bare + "," + server-first + "," + client-final-without-
proof``, the proof checks as ``H(ClientProof XOR HMAC(StoredKey, AuthMessage)) == StoredKey``
and the server proves itself with ``HMAC(ServerKey, AuthMessage)``. No channel binding (GS2
header ``n`` or ``y``, never ``p``); an ``a=`` authzid must name the user itself; Kafka's
``tokenauth`` extension (delegation tokens) is refused, other extensions are ignored; user
names decode ``=2C`` and ``=3D``. An unknown user is answered with a fake salt derived from
the name (the same on every try, so the answer does not reveal it is unknown) and fails at
the proof. Every problem is a ``ScramError``; the caller ends the exchange on any. Pure.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable

from yak.security.scram import (
    DEFAULT_ITERATIONS,
    MECHANISMS,
    ScramCredential,
    ScramError,
)

__all__ = ["ScramServer"]

#: Per process: the fake salts of unknown users are stable here, unguessable elsewhere.
_FAKE_SALT_KEY = secrets.token_bytes(32)
_MAX_MESSAGE = 4096


class ScramServer:
    """One exchange; ``first`` then ``final``, each at most once."""

    def __init__(
        self,
        mechanism: str,
        credential_of: Callable[[str], ScramCredential | None],
        *,
        server_nonce: str | None = None,
    ) -> None:
        if mechanism not in MECHANISMS:
            raise ScramError(f"unsupported SCRAM mechanism {mechanism!r}")
        self.mechanism = mechanism
        self._algorithm = MECHANISMS[mechanism]
        self._credential_of = credential_of
        self._server_nonce = server_nonce or secrets.token_urlsafe(32)
        #: The user the client named (set by ``first``).
        self.user = ""
        self._credential: ScramCredential | None = None
        self._known = False
        self._gs2 = ""
        self._nonce = ""
        self._first_bare = ""
        self._server_first = ""
        self._step = 0

    def first(self, client_first: bytes) -> bytes:
        """The server-first message for the client-first one."""
        if self._step != 0:
            raise ScramError("the client-first message came twice")
        self._step = 1
        text = _text(client_first)
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            raise ScramError("a SCRAM client-first message must start with 'n,,' (no binding)")
        self._gs2 = f"{parts[0]},{parts[1]},"
        self._first_bare = parts[2]
        attributes = _attributes(self._first_bare)
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
            raise ScramError("a SCRAM client-first message needs n=<user>,r=<nonce>")
        self.user = _sasl_name(attributes[0][1])
        if parts[1] and _sasl_name(parts[1].removeprefix("a=")) != self.user:
            raise ScramError("a SCRAM authorization id must name the user itself")
        if any(key in ("tokenauth", "m") for key, _ in attributes[2:]):
            raise ScramError("SCRAM extensions tokenauth and m are not supported")
        client_nonce = attributes[1][1]
        if not client_nonce:
            raise ScramError("an empty SCRAM client nonce")
        credential = self._credential_of(self.user)
        self._known = credential is not None
        self._credential = credential if credential is not None else self._fake(self.user)
        self._nonce = client_nonce + self._server_nonce
        salt = base64.b64encode(self._credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self._credential.iterations}"
        return self._server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        """The server-final message; ``ScramError`` when the proof is wrong."""
        if self._step != 1 or self._credential is None:
            raise ScramError("the client-final message came out of order")
        self._step = 2
        text = _text(client_final)
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramError("a SCRAM client-final message needs a proof")
        attributes = _attributes(without_proof)
        if len(attributes) < 2 or attributes[0][0] != "c" or attributes[1][0] != "r":
            raise ScramError("a SCRAM client-final message needs c=...,r=...")
        if attributes[0][1] != base64.b64encode(self._gs2.encode()).decode():
            raise ScramError("the SCRAM channel binding does not match the client-first one")
        if attributes[1][1] != self._nonce:
            raise ScramError("the SCRAM nonce does not match")
        proof = _b64decode(proof_part)
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        credential = self._credential
        signature = hmac.new(credential.stored_key, auth_message, self._algorithm).digest()
        if len(proof) != len(signature):
            raise ScramError("a SCRAM proof of the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        stored = hashlib.new(self._algorithm, client_key).digest()
        if not (hmac.compare_digest(stored, credential.stored_key) and self._known):
            raise ScramError(f"authentication failed: wrong password for {self.user!r}")
        server = hmac.new(credential.server_key, auth_message, self._algorithm).digest()
        return b"v=" + base64.b64encode(server)

    def _fake(self, user: str) -> ScramCredential:
        salt = hmac.new(_FAKE_SALT_KEY, user.encode(), "sha256").digest()
        return ScramCredential(salt, DEFAULT_ITERATIONS, secrets.token_bytes(64), b"")


def _text(message: bytes) -> str:
    if len(message) > _MAX_MESSAGE:
        raise ScramError("a SCRAM message longer than 4 KiB")
    try:
        return message.decode()
    except UnicodeDecodeError:
        raise ScramError("a SCRAM message that is not UTF-8") from None


def _attributes(text: str) -> list[tuple[str, str]]:
    found = []
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ScramError(f"a malformed SCRAM attribute {part[:40]!r}")
        found.append((key, value))
    return found


def _sasl_name(text: str) -> str:
    """RFC 5802's saslname: ``=2C`` is a comma, ``=3D`` an equals sign, nothing else escaped."""
    decoded = text.replace("=2C", ",").replace("=3D", "=")
    if not decoded or "=" in text.replace("=2C", "").replace("=3D", ""):
        raise ScramError("a malformed SCRAM user name")
    return decoded


def _b64decode(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ScramError("a SCRAM proof that is not base64") from None
