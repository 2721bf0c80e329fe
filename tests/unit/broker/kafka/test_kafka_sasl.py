"""SASL on the Kafka listener (SASL_PLAINTEXT, in-process): PLAIN with a password or an API
key, wrong passwords and unknown users, SCRAM-SHA-256/512, handshake v0's raw tokens, requests
before authentication, SASL requests out of turn, malformed tokens and bodies — each refused
with Kafka's answer or a closed connection, and the broker still serving afterwards."""

from __future__ import annotations

import contextlib
import logging
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v0.request import SaslAuthenticateRequest as Authenticate0
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as Handshake0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.unit.broker.kafka.kafka_test_client import (
    KafkaTestConnection,
    kafka_port,
    request_frame,
)
from tests.unit.broker.kafka.secured_broker import (
    PASSWORDS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    Secured,
    login,
    secured_broker,
)
from yak.metadata.memory_store import MemoryMetadataStore
from yak.security.audit import AUDIT_LOGGER
from yak.security.login_limiter import DEFAULT_MAX_FAILURES
from yak_broker.app import create_app
from yak_broker.settings import BrokerSettings

METADATA, API_VERSIONS = 3, 18
ALL_TOPICS = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[Secured]:
    async with secured_broker(tmp_path) as broker:
        yield broker


async def _closed(connection: KafkaTestConnection) -> bool:
    """Whether the broker closed the connection (then closed on this side too)."""
    closed = await connection.closed_by_peer()
    with contextlib.suppress(OSError):
        await connection.close()
    return closed


async def _still_serves(secured: Secured) -> None:
    connection = await secured.connect("alice")
    answer = await connection.call(METADATA, 12, ALL_TOPICS)
    assert answer.cluster_id == "local"
    await connection.close()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_a_login_then_requests_are_served(secured: Secured, mechanism: str) -> None:
    connection = await KafkaTestConnection.open(secured.port)
    assert await login(connection, mechanism, "alice", "alice-pw") == (0, None)
    answer = await connection.call(METADATA, 12, ALL_TOPICS)
    assert answer.cluster_id == "local"
    await connection.close()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "x")])
async def test_a_wrong_password_or_unknown_user_fails_and_closes(
    secured: Secured, mechanism: str, user: str, password: str, caplog: pytest.LogCaptureFixture
) -> None:
    connection = await KafkaTestConnection.open(secured.port)
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        code, message = await login(connection, mechanism, user, password)
    assert code == 58  # SASL_AUTHENTICATION_FAILED
    assert message is not None
    assert "Authentication failed" in message
    assert await _closed(connection)
    audited = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    assert any('"result": "unauthenticated"' in line for line in audited)
    await _still_serves(secured)


async def test_plain_takes_an_api_key_of_the_user_as_the_password(secured: Secured) -> None:
    key = await secured.users.add_key("bob", "kafka")
    await secured.sync(key.revision)
    connection = await KafkaTestConnection.open(secured.port)
    assert await login(connection, "PLAIN", "bob", key.token) == (0, None)
    await connection.close()
    connection = await KafkaTestConnection.open(secured.port)
    code, _ = await login(connection, "PLAIN", "alice", key.token)  # bob's key, not alice's
    assert code == 58
    assert await _closed(connection)


async def test_a_password_set_again_takes_effect_for_scram_and_plain(secured: Secured) -> None:
    await secured.sync(await secured.users.set_password("bob", "new-pw"))
    for mechanism in ("PLAIN", "SCRAM-SHA-512"):
        connection = await KafkaTestConnection.open(secured.port)
        assert (await login(connection, mechanism, "bob", PASSWORDS["bob"]))[0] == 58
        assert await _closed(connection)
        connection = await KafkaTestConnection.open(secured.port)
        assert await login(connection, mechanism, "bob", "new-pw") == (0, None)
        await connection.close()


async def test_before_authentication_only_api_versions_and_sasl_are_served(
    secured: Secured,
) -> None:
    connection = await KafkaTestConnection.open(secured.port)
    versions = await connection.call(
        API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")
    )
    served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert served[SASL_HANDSHAKE] == (0, 1)
    assert served[SASL_AUTHENTICATE] == (0, 2)
    connection.send(METADATA, 12, ALL_TOPICS)
    assert await _closed(connection)
    await _still_serves(secured)


async def test_an_unsupported_mechanism_is_answered_with_the_list_then_closed(
    secured: Secured,
) -> None:
    connection = await KafkaTestConnection.open(secured.port)
    answer = await connection.call(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="GSSAPI"))
    assert answer.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
    assert answer.mechanisms == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    assert await _closed(connection)


async def test_sasl_requests_out_of_turn_are_illegal_and_close(secured: Secured) -> None:
    early = await KafkaTestConnection.open(secured.port)
    answer = await early.call(SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"x"))
    assert answer.error_code == 34  # ILLEGAL_SASL_STATE
    assert await _closed(early)
    again = await secured.connect("alice")
    answer = await again.call(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
    assert answer.error_code == 34
    assert await _closed(again)


@pytest.mark.parametrize(
    ("mechanism", "token"),
    [
        ("PLAIN", b"no separators"),
        ("PLAIN", b"\0alice\0alice-pw\0extra"),
        ("PLAIN", b"\0\xff\xfe\0pw"),
        ("PLAIN", b"bob\0alice\0alice-pw"),  # an authzid that is not the user
        ("SCRAM-SHA-256", b"garbage"),
        ("SCRAM-SHA-512", b"p=tls-server-end-point,,n=alice,r=abc"),
    ],
)
async def test_a_malformed_token_fails_and_closes(
    secured: Secured, mechanism: str, token: bytes
) -> None:
    connection = await KafkaTestConnection.open(secured.port)
    await connection.call(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism))
    answer = await connection.call(SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=token))
    assert answer.error_code == 58
    assert await _closed(connection)
    await _still_serves(secured)


async def test_a_malformed_sasl_body_closes_at_once(secured: Secured) -> None:
    connection = await KafkaTestConnection.open(secured.port)
    await connection.call(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
    frame = request_frame(SASL_AUTHENTICATE, 2, 9, b"\x7f\xff\xff\xff")  # a length past the end
    connection.writer.write(frame)
    assert await _closed(connection)
    await _still_serves(secured)


@pytest.mark.parametrize("password", ["alice-pw", "wrong"])
async def test_handshake_v0_then_raw_plain_tokens(secured: Secured, password: str) -> None:
    connection = await KafkaTestConnection.open(secured.port)
    answer = await connection.call(SASL_HANDSHAKE, 0, Handshake0(mechanism="PLAIN"))
    assert answer.error_code == 0
    token = f"\0alice\0{password}".encode()
    connection.writer.write(struct.pack(">i", len(token)) + token)
    if password != "alice-pw":
        assert await _closed(connection)
        return
    assert await connection.read_frame() == b""  # PLAIN's empty server token, unframed
    metadata = await connection.call(METADATA, 12, ALL_TOPICS)
    assert metadata.cluster_id == "local"
    await connection.close()


async def test_sasl_authenticate_v0(secured: Secured) -> None:
    connection = await KafkaTestConnection.open(secured.port)
    await connection.call(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
    answer = await connection.call(
        SASL_AUTHENTICATE, 0, Authenticate0(auth_bytes=b"\0alice\0alice-pw")
    )
    assert (answer.error_code, answer.auth_bytes) == (0, b"")
    await connection.close()


async def test_sasl_on_a_plaintext_listener_is_illegal(tmp_path: Path) -> None:
    store = MemoryMetadataStore()
    app = create_app(BrokerSettings(data_dir=tmp_path / "plain"), store_factory=lambda _: store)
    async with app.router.lifespan_context(app):
        connection = await KafkaTestConnection.open(kafka_port(app.state.broker))
        answer = await connection.call(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        assert (answer.error_code, answer.mechanisms) == (34, ())
        metadata = await connection.call(METADATA, 12, ALL_TOPICS)  # still open, unauthenticated
        assert metadata.cluster_id == "local"
        await connection.close()
    await store.aclose()


async def test_failed_scram_proofs_count_toward_the_login_limit(
    secured: Secured, caplog: pytest.LogCaptureFixture
) -> None:
    for _ in range(DEFAULT_MAX_FAILURES):
        connection = await KafkaTestConnection.open(secured.port)
        assert (await login(connection, "SCRAM-SHA-256", "bob", "guess"))[0] == 58
        assert await _closed(connection)
    for mechanism in ("SCRAM-SHA-512", "PLAIN"):  # one limit per user, whatever the mechanism
        connection = await KafkaTestConnection.open(secured.port)
        with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
            code, message = await login(connection, mechanism, "bob", PASSWORDS["bob"])
        assert code == 58
        assert message is not None
        assert "too many failed logins" in message
        assert await _closed(connection)
    audited = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    assert sum('"result": "throttled"' in line for line in audited) == 2
    connection = await KafkaTestConnection.open(secured.port)  # another user is not limited
    assert await login(connection, "SCRAM-SHA-256", "alice", "alice-pw") == (0, None)
    await connection.close()
