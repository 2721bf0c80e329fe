"""RFC 5802's client side, written here from the RFC (as kafka-python and librdkafka compute
it), independent of the server code it tests."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from yak.security.scram import MECHANISMS

__all__ = ["ScramClient"]


class ScramClient:
    """RFC 5802's client side, as kafka-python and librdkafka compute it."""

    def __init__(self, user: str, password: str, mechanism: str) -> None:
        self._user, self._password = user, password
        self._algorithm = MECHANISMS[mechanism]
        self._nonce = secrets.token_hex(12)
        self._auth = ""
        self._proof = b""
        self._server_signature = b""

    def first_message(self) -> bytes:
        self._auth = f"n={self._user},r={self._nonce}"
        return f"n,,{self._auth}".encode()

    def process_server_first_message(self, message: bytes) -> None:
        fields = dict(part.split("=", 1) for part in message.decode().split(","))
        assert fields["r"].startswith(self._nonce)
        self._nonce = fields["r"]
        self._auth += f",{message.decode()},c=biws,r={self._nonce}"
        salted = hashlib.pbkdf2_hmac(
            self._algorithm,
            self._password.encode(),
            base64.b64decode(fields["s"]),
            int(fields["i"]),
        )
        client_key = hmac.new(salted, b"Client Key", self._algorithm).digest()
        stored = hashlib.new(self._algorithm, client_key).digest()
        signature = hmac.new(stored, self._auth.encode(), self._algorithm).digest()
        self._proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.new(salted, b"Server Key", self._algorithm).digest()
        self._server_signature = hmac.new(server_key, self._auth.encode(), self._algorithm).digest()

    def final_message(self) -> bytes:
        return f"c=biws,r={self._nonce},p={base64.b64encode(self._proof).decode()}".encode()

    def process_server_final_message(self, message: bytes) -> None:
        if base64.b64decode(message.decode().removeprefix("v=")) != self._server_signature:
            raise ValueError("the server's signature is wrong")
