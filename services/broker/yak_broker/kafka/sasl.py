"""SASL on the Kafka listener: SaslHandshake (17, v0-v1) and SaslAuthenticate (36, v0-v2).

A connection of a ``SASL_*`` listener has a ``SaslSession``. Until it is authenticated only
ApiVersions, SaslHandshake and SaslAuthenticate are served (``PRE_AUTHENTICATION``; the
listener closes the connection on anything else, as Kafka does). The exchange, as Kafka's:

1. SaslHandshake names a mechanism: ``PLAIN``, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``
   (``security.MECHANISMS``); another gets ``UNSUPPORTED_SASL_MECHANISM`` (33) with the list,
   and the connection is closed after the answer.
2. v1: the tokens travel in SaslAuthenticate requests (the answer carries the server's token).
   v0 (the old clients' way): the tokens that follow travel *unframed* — an ``int32`` size and
   the token, answered the same way (``raw_token``) — until authenticated.
3. **PLAIN** (RFC 4616): ``[authzid] \\0 user \\0 password``, checked against the user's
   password hash (argon2id, in a thread, as HTTP Basic) — or, when the password is one of the
   user's API keys (``yak_<id>_<secret>``), against that key. An authzid must be the user.
   **SCRAM**: two round trips against the user's stored SCRAM credential
   (``yak.security.scram_server``); a user whose password predates SCRAM credentials cannot
   use SCRAM until the password is set again.
4. A failure — a wrong password, an unknown user, a malformed token, too many failed logins —
   answers ``SASL_AUTHENTICATION_FAILED`` (58) with a message and closes the connection; it is
   audited (``unauthenticated``/``throttled``, as ``User:ANONYMOUS``). A SASL request out of
   turn (a second handshake, SaslAuthenticate before a handshake or after success) answers
   ``ILLEGAL_SASL_STATE`` (34) and closes. A body that does not parse closes at once.

Success sets the session's principal (``User:<name>``), which every later request of the
connection carries (``KafkaRequest.principal``). ``session_lifetime_ms`` is 0: no
re-authentication (KIP-368) is asked for. On a listener without SASL, the SASL APIs answer
``ILLEGAL_SASL_STATE`` and the connection stays as it was. Single event loop: a session
belongs to one connection, whose requests are dispatched in arrival order.
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
from yak_broker.kafka.context import ANONYMOUS, KafkaRequest
from yak_broker.kafka.schemas import API_VERSIONS_KEY, read_request, write_response

if TYPE_CHECKING:
    from yak_broker.kafka.security import KafkaSecurity

__all__ = [
    "API_SASL_AUTHENTICATE",
    "API_SASL_HANDSHAKE",
    "PRE_AUTHENTICATION",
    "SaslSession",
    "handle_sasl_authenticate",
    "handle_sasl_handshake",
]

_log = logging.getLogger(__name__)
API_SASL_HANDSHAKE = 17
API_SASL_AUTHENTICATE = 36
#: The APIs served before a connection of a SASL listener is authenticated.
PRE_AUTHENTICATION = frozenset({API_VERSIONS_KEY, API_SASL_HANDSHAKE, API_SASL_AUTHENTICATE})
_UNSUPPORTED_SASL_MECHANISM = 33
_ILLEGAL_SASL_STATE = 34
_SASL_AUTHENTICATION_FAILED = 58


class _SaslFailedError(Exception):
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
            return _ILLEGAL_SASL_STATE
        if mechanism not in self._security.mechanisms:
            self.closing = True
            return _UNSUPPORTED_SASL_MECHANISM
        self.mechanism = mechanism
        self.raw = version == 0
        return 0

    async def step(self, token: bytes) -> bytes:
        """The server's answer to one client token; ``_SaslFailedError`` ends the exchange."""
        if self._busy:
            raise _SaslFailedError("a SASL token arrived before the previous one was answered")
        self._busy = True
        try:
            if self.mechanism == "PLAIN":
                self._authenticated(await self._plain(token))
                return b""
            return self._scram_step(token)
        except _SaslFailedError as exc:
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
        except _SaslFailedError as exc:
            raise InvalidRequestError(f"SASL authentication failed: {exc.message}") from None
        return [SIZE.pack(len(answer)), answer]

    async def _plain(self, token: bytes) -> str:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise _SaslFailedError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (part.decode() for part in parts)
        except UnicodeDecodeError:
            raise _SaslFailedError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user or not password:
            raise _SaslFailedError("Authentication failed: username or password not specified")
        if authzid and authzid != user:
            raise _SaslFailedError("Authentication failed: the authorization id must be the user")
        cache = self._security.cache
        try:
            if parse_api_key(password) is not None:
                principal = await cache.authenticate_api_key(password)
                if principal != user_principal(user):
                    raise AuthenticationError("the API key is not the user's")
                return principal
            return await cache.authenticate_password(user, password)
        except AuthenticationThrottledError as exc:
            raise _SaslFailedError(exc.message, throttled=True) from None
        except AuthenticationError:
            raise _SaslFailedError("Authentication failed: Invalid username or password") from None

    def _scram_step(self, token: bytes) -> bytes:
        mechanism = self.mechanism
        assert mechanism is not None
        try:
            if self._scram is None:
                cache = self._security.cache
                self._scram = ScramServer(
                    mechanism, lambda user: cache.scram_credential(user, mechanism)
                )
                return self._scram.first(token)
            answer = self._scram.final(token)
        except ScramError as exc:
            _log.info("SCRAM login from %s failed: %s", self.peer, exc)
            raise _SaslFailedError(
                "Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {mechanism}"
            ) from None
        self._authenticated(user_principal(self._scram.user))
        return answer

    def _authenticated(self, principal: str) -> None:
        self.principal = principal
        self.authenticated = True
        self.raw = False


async def handle_sasl_handshake(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_SASL_HANDSHAKE, request.api_version, request.body)
    session = request.session
    if session is None:
        code, mechanisms = _ILLEGAL_SASL_STATE, []
    else:
        code = session.handshake(str(parsed.mechanism), request.api_version)
        mechanisms = list(session.mechanisms)
    values = {"error_code": code, "mechanisms": mechanisms}
    return write_response(API_SASL_HANDSHAKE, request.api_version, request.correlation_id, values)


async def handle_sasl_authenticate(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_SASL_AUTHENTICATE, request.api_version, request.body)
    session = request.session
    values: dict[str, object] = {"auth_bytes": b"", "error_message": None, "session_lifetime": 0}
    if session is None or session.mechanism is None or session.authenticated or session.raw:
        if session is not None:
            session.closing = True
        values.update(error_code=_ILLEGAL_SASL_STATE, error_message="Unexpected SaslAuthenticate")
    else:
        try:
            values.update(error_code=0, auth_bytes=await session.step(bytes(parsed.auth_bytes)))
        except _SaslFailedError as exc:
            values.update(error_code=_SASL_AUTHENTICATION_FAILED, error_message=exc.message)
    return write_response(
        API_SASL_AUTHENTICATE, request.api_version, request.correlation_id, values
    )
