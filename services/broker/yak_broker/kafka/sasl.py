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

from yak.protocol.broker_wire import Buffer
from yak_broker.kafka.context import KafkaRequest
from yak_broker.kafka.sasl_session import (
    ILLEGAL_SASL_STATE,
    SASL_AUTHENTICATION_FAILED,
    SaslFailedError,
    SaslSession,
)
from yak_broker.kafka.schemas import API_VERSIONS_KEY, read_request, write_response

__all__ = [
    "API_SASL_AUTHENTICATE",
    "API_SASL_HANDSHAKE",
    "PRE_AUTHENTICATION",
    "SaslSession",
    "handle_sasl_authenticate",
    "handle_sasl_handshake",
]

API_SASL_HANDSHAKE = 17
API_SASL_AUTHENTICATE = 36
#: The APIs served before a connection of a SASL listener is authenticated.
PRE_AUTHENTICATION = frozenset({API_VERSIONS_KEY, API_SASL_HANDSHAKE, API_SASL_AUTHENTICATE})


async def handle_sasl_handshake(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_SASL_HANDSHAKE, request.api_version, request.body)
    session = request.session
    if session is None:
        code, mechanisms = ILLEGAL_SASL_STATE, []
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
        values.update(error_code=ILLEGAL_SASL_STATE, error_message="Unexpected SaslAuthenticate")
    else:
        try:
            values.update(error_code=0, auth_bytes=await session.step(bytes(parsed.auth_bytes)))
        except SaslFailedError as exc:
            values.update(error_code=SASL_AUTHENTICATION_FAILED, error_message=exc.message)
    return write_response(
        API_SASL_AUTHENTICATE, request.api_version, request.correlation_id, values
    )
