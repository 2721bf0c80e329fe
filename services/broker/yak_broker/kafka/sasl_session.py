"""One Kafka connection's SASL state: ``SaslSession`` (the exchange of ``kafka.sasl``).

The principal starts as ``ANONYMOUS`` and becomes ``User:<name>`` once an exchange succeeds;
``closing`` tells the listener to close the connection after the answer being written (a
failed exchange, a SASL request out of turn); ``raw`` says the next frames are unframed
tokens (after a handshake v0). ``step`` runs one client token through the chosen mechanism —
PLAIN against the user's password (or API key) hash, SCRAM against its stored credential,
both counted by the cache's failed-login limiter — and audits a failure. A leaf module (the
request context names its type): it imports nothing of the listener. Single event loop: a
session belongs to one connection.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from yak.errors import AuthenticationError, AuthenticationThrottledError, InvalidRequestError
from yak.protocol.broker_wire import Buffer
from yak.protocol.kafka_types import SIZE
from yak.security.acl import user_principal
from yak.security.audit import audit
from yak.security.credentials import parse_api_key
from yak.security.scram import ScramError
from yak.security.scram_server import ScramServer

if TYPE_CHECKING:
    from yak_broker.kafka.security import KafkaSecurity

__all__ = [
    "ANONYMOUS",
    "ILLEGAL_SASL_STATE",
    "SASL_AUTHENTICATION_FAILED",
    "UNSUPPORTED_SASL_MECHANISM",
    "SaslFailedError",
    "SaslSession",
]

_log = logging.getLogger(__name__)
#: The principal of a connection that did not authenticate (Kafka's and the rest-proxy's).
ANONYMOUS = "User:ANONYMOUS"
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58


class SaslFailedError(Exception):
    """The exchange failed; the message goes to the client."""

    def __init__(self, message: str, *, throttled: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.throttled = throttled


class SaslSession:
    """One connection's authentication (see the module docstring)."""

    def __init__(self, security: KafkaSecurity, peer: str) -> None:
        self._security = security
        self.peer = peer
        self.principal = ANONYMOUS
        self.authenticated = False
        #: The mechanism the handshake chose (None: no handshake yet).
        self.mechanism: str | None = None
        #: Handshake v0: the tokens that follow come unframed (``raw_token``).
        self.raw = False
        #: The listener closes the connection once this request's answer is written.
        self.closing = False
        self._busy = False
        self._scram: ScramServer | None = None

    @property
    def mechanisms(self) -> tuple[str, ...]:
        return self._security.mechanisms

    def handshake(self, mechanism: str, version: int) -> int:
        """The handshake's error code (0: the mechanism is chosen)."""
        if self.mechanism is not None or self.authenticated:
            self.closing = True
            return ILLEGAL_SASL_STATE
        if mechanism not in self._security.mechanisms:
            self.closing = True
            return UNSUPPORTED_SASL_MECHANISM
        self.mechanism = mechanism
        self.raw = version == 0
        return 0

    async def step(self, token: bytes) -> bytes:
        """The server's answer to one client token; ``SaslFailedError`` ends the exchange."""
        if self._busy:
            raise SaslFailedError("a SASL token arrived before the previous one was answered")
        self._busy = True
        try:
            if self.mechanism == "PLAIN":
                self._authenticated(await self._plain(token))
                return b""
            return self._scram_step(token)
        except SaslFailedError as exc:
            self.closing = True
            result = "throttled" if exc.throttled else "unauthenticated"
            action = f"Kafka SASL {self.mechanism}"
            audit(principal=ANONYMOUS, action=action, result=result, remote=self.peer)
            raise
        finally:
            self._busy = False

    async def raw_token(self, data: Buffer) -> list[Buffer]:
        """Handshake v0: answer an unframed token unframed; ``InvalidRequestError`` (the
        listener closes the connection) when the exchange fails."""
        try:
            answer = await self.step(bytes(data))
        except SaslFailedError as exc:
            raise InvalidRequestError(f"SASL authentication failed: {exc.message}") from None
        return [SIZE.pack(len(answer)), answer]

    async def _plain(self, token: bytes) -> str:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslFailedError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (part.decode() for part in parts)
        except UnicodeDecodeError:
            raise SaslFailedError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user or not password:
            raise SaslFailedError("Authentication failed: username or password not specified")
        if authzid and authzid != user:
            raise SaslFailedError("Authentication failed: the authorization id must be the user")
        cache = self._security.cache
        try:
            if parse_api_key(password) is not None:
                principal = await cache.authenticate_api_key(password)
                if principal != user_principal(user):
                    raise AuthenticationError("the API key is not the user's")
                return principal
            return await cache.authenticate_password(user, password)
        except AuthenticationThrottledError as exc:
            raise SaslFailedError(exc.message, throttled=True) from None
        except AuthenticationError:
            raise SaslFailedError("Authentication failed: Invalid username or password") from None

    def _scram_step(self, token: bytes) -> bytes:
        mechanism = self.mechanism
        assert mechanism is not None
        cache = self._security.cache
        try:
            if self._scram is None:
                self._scram = ScramServer(
                    mechanism, lambda user: cache.scram_credential(user, mechanism)
                )
                first = self._scram.first(token)
                cache.check_login(self._scram.user)  # too many failures: refused unchecked
                return first
            answer = self._scram.final(token)
        except AuthenticationThrottledError as exc:
            raise SaslFailedError(exc.message, throttled=True) from None
        except ScramError as exc:
            _log.info("SCRAM login from %s failed: %s", self.peer, exc)
            user = self._scram.user if self._scram is not None else ""
            if user and cache.scram_credential(user, mechanism) is not None:
                cache.count_login(user, ok=False)
            raise SaslFailedError(
                "Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {mechanism}"
            ) from None
        cache.count_login(self._scram.user, ok=True)
        self._authenticated(user_principal(self._scram.user))
        return answer

    def _authenticated(self, principal: str) -> None:
        self.principal = principal
        self.authenticated = True
        self.raw = False
