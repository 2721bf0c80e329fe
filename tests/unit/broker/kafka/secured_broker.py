"""An in-process broker whose Kafka listener speaks SASL_PLAINTEXT, with users and a login
helper, for the SASL and authorization tests (``secured`` fixture in those modules)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from argon2 import PasswordHasher
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.unit.broker.broker_harness import BrokerHarness
from tests.unit.broker.kafka.kafka_test_client import KafkaTestConnection, kafka_port
from tests.unit.shared.security.scram_client import ScramClient
from yak.clients.broker import BrokerClient
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.security import AclBinding, SecurityStore
from yak_broker.app import create_app
from yak_broker.kafka.listener import KafkaListener
from yak_broker.settings import BrokerSettings

__all__ = ["SASL_AUTHENTICATE", "SASL_HANDSHAKE", "Secured", "login", "secured_broker"]

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
FAST = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
#: Users and passwords every secured broker has (``admin`` is a super-user).
PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw", "admin": "admin-pw"}


@dataclass
class Secured:
    harness: BrokerHarness
    users: SecurityStore

    @property
    def port(self) -> int:
        return kafka_port(self.harness.broker)

    async def sync(self, revision: int) -> None:
        """Wait until the listener's security cache reflects a write."""
        listener = self.harness.broker.kafka_listener
        assert isinstance(listener, KafkaListener)
        security = listener._server_state.security
        assert security is not None
        await security.cache.wait_for_revision(revision, timeout_s=5)

    async def allow(self, *acls: AclBinding) -> None:
        await self.sync(await self.users.add_acls(list(acls)))

    async def connect(self, user: str | None = None) -> KafkaTestConnection:
        """A connection, logged in with SASL/PLAIN as ``user`` (None: not logged in)."""
        connection = await KafkaTestConnection.open(self.port)
        if user is not None:
            code, _ = await login(connection, "PLAIN", user, PASSWORDS[user])
            assert code == 0
        return connection


async def login(
    connection: KafkaTestConnection, mechanism: str, user: str, password: str
) -> tuple[int, str | None]:
    """Handshake v1 and SaslAuthenticate v2 rounds; the last error code and message."""
    shaken = await connection.call(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism))
    if shaken.error_code != 0:
        return int(shaken.error_code), None
    if mechanism == "PLAIN":
        token = f"\0{user}\0{password}".encode()
        answer = await connection.call(
            SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=token)
        )
        return int(answer.error_code), answer.error_message
    client = ScramClient(user, password, mechanism)
    first = await connection.call(
        SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=client.first_message())
    )
    if first.error_code != 0:
        return int(first.error_code), first.error_message
    client.process_server_first_message(first.auth_bytes)
    final = await connection.call(
        SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=client.final_message())
    )
    if final.error_code == 0:
        client.process_server_final_message(final.auth_bytes)
    return int(final.error_code), final.error_message


@contextlib.asynccontextmanager
async def secured_broker(tmp_path: Path, **settings: object) -> AsyncIterator[Secured]:
    """A broker with ``security`` on (SASL_PLAINTEXT) and the users of ``PASSWORDS``."""
    store = MemoryMetadataStore()
    keyspace = Keyspace("local")
    users = SecurityStore(store, keyspace, hasher=FAST)
    for name, password in PASSWORDS.items():
        await users.create_user(name, password=password)
    config = BrokerSettings(
        data_dir=tmp_path / "broker-0",
        security=True,
        super_users=("User:admin",),
        **settings,  # type: ignore[arg-type]
    )
    app = create_app(config, store_factory=lambda _url: store)
    transport = httpx.ASGITransport(app=app)
    try:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://broker") as http,
            BrokerClient("http://broker", transport=transport) as client,
        ):
            harness = BrokerHarness(store, keyspace, app.state.broker, client, http, transport)
            yield Secured(harness, users)
    finally:
        await store.aclose()
