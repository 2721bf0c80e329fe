"""SASL on the internal plane: SaslHandshake v1 and SaslAuthenticate v2 (pure: no I/O).

With a cluster secret configured, the first requests of every internal connection are a
SaslHandshake naming ``PLAIN`` and a SaslAuthenticate whose token is ``\\0user\\0password`` with
the secret as the password (RFC 4616), as Kafka's SASL/PLAIN does. Framing and headers are
``kafka_wire``'s; SaslHandshake is not a flexible message (request header v1, response header
v0).
"""

from __future__ import annotations

from collections.abc import Sequence

from yak.protocol.broker_wire import Buffer
from yak.protocol.kafka_types import (
    EMPTY_TAGS,
    I16,
    I32,
    I64,
    SIZE,
    Reader,
    compact_string,
    uvarint,
)
from yak.protocol.kafka_wire import (
    API_SASL_AUTHENTICATE,
    API_SASL_HANDSHAKE,
    SASL_AUTHENTICATE_VERSION,
    SASL_HANDSHAKE_VERSION,
    frame,
    request_header,
    response_header,
)

__all__ = [
    "decode_sasl_authenticate_request",
    "decode_sasl_authenticate_response",
    "decode_sasl_handshake_request",
    "decode_sasl_handshake_response",
    "encode_sasl_authenticate_request",
    "encode_sasl_authenticate_response",
    "encode_sasl_handshake_request",
    "encode_sasl_handshake_response",
]


def encode_sasl_handshake_request(
    mechanism: str, correlation_id: int, client_id: str = "yak"
) -> list[Buffer]:
    """SaslHandshake v1: ``mechanism string`` (non-flexible: header v1)."""
    data = mechanism.encode()
    head = request_header(API_SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, correlation_id, client_id)
    return frame(head + I16.pack(len(data)) + data, ())


def decode_sasl_handshake_request(body: Buffer) -> str:
    reader = Reader(body, "sasl handshake")
    mechanism = reader.nullable_string16("mechanism")
    reader.end()
    return mechanism or ""


def encode_sasl_handshake_response(
    correlation_id: int, error_code: int, mechanisms: Sequence[str]
) -> list[Buffer]:
    """``error_code int16, mechanisms [string]`` (response header v0)."""
    out = bytearray(response_header(correlation_id, False))
    out += I16.pack(error_code) + I32.pack(len(mechanisms))
    for mechanism in mechanisms:
        data = mechanism.encode()
        out += I16.pack(len(data)) + data
    return [SIZE.pack(len(out)) + out]


def decode_sasl_handshake_response(body: Buffer) -> tuple[int, list[str]]:
    reader = Reader(body, "sasl handshake response")
    code = reader.int16("error_code")
    count = reader.int32("mechanisms")
    mechanisms = [reader.nullable_string16("mechanism") or "" for _ in range(max(count, 0))]
    reader.end()
    return code, mechanisms


def encode_sasl_authenticate_request(
    auth_bytes: bytes, correlation_id: int, client_id: str = "yak"
) -> list[Buffer]:
    """SaslAuthenticate v2: ``auth_bytes compact bytes``."""
    head = request_header(
        API_SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION, correlation_id, client_id
    )
    return frame(head + uvarint(len(auth_bytes) + 1) + auth_bytes + EMPTY_TAGS, ())


def decode_sasl_authenticate_request(body: Buffer) -> bytes:
    reader = Reader(body, "sasl authenticate")
    data = reader.compact_bytes("auth_bytes")
    reader.tags("sasl authenticate")
    reader.end()
    return bytes(data or b"")


def encode_sasl_authenticate_response(
    correlation_id: int, error_code: int, error_message: str | None
) -> list[Buffer]:
    """``error_code int16, error_message, auth_bytes, session_lifetime_ms int64``."""
    out = bytearray(response_header(correlation_id, True))
    out += I16.pack(error_code) + compact_string(error_message) + b"\x01" + I64.pack(0)
    out += EMPTY_TAGS
    return [SIZE.pack(len(out)) + out]


def decode_sasl_authenticate_response(body: Buffer) -> tuple[int, str | None]:
    reader = Reader(body, "sasl authenticate response")
    code = reader.int16("error_code")
    message = reader.compact_string("error_message")
    reader.compact_bytes("auth_bytes")
    reader.int64("session_lifetime_ms")
    reader.tags("sasl authenticate response")
    reader.end()
    return code, message
