"""SCRAM credentials and the server's exchange: RFC 7677's SHA-256 vector, a client written
from RFC 5802 here (kafka-python's algorithm) for both mechanisms, wrong passwords, unknown
users and malformed messages."""

from __future__ import annotations

import base64
from types import MappingProxyType

import pytest
from argon2 import PasswordHasher

from tests.unit.shared.security.scram_client import ScramClient
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.security import SecurityCache, SecurityStore, UserRecord
from yak.security.scram import (
    MECHANISMS,
    ScramCredential,
    ScramError,
    scram_credential,
    scram_credentials,
)
from yak.security.scram_server import ScramServer

KS = Keyspace("scram")
FAST = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
# RFC 7677 §3: user "user", password "pencil".
_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
_NONCE = "rOprNGfwEbeRWgbNEkqO" + _SERVER_NONCE
_SERVER_FIRST = f"r={_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
_CLIENT_FINAL = f"c=biws,r={_NONCE},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=".encode()
_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _users(**passwords: str) -> dict[str, dict[str, ScramCredential]]:
    return {user: scram_credentials(password) for user, password in passwords.items()}


def _server(mechanism: str, users: dict[str, dict[str, ScramCredential]]) -> ScramServer:
    return ScramServer(mechanism, lambda user: users.get(user, {}).get(mechanism))


def test_rfc_7677_vector() -> None:
    credential = scram_credential("pencil", "SCRAM-SHA-256", salt=_SALT, iterations=4096)
    server = ScramServer("SCRAM-SHA-256", {"user": credential}.get, server_nonce=_SERVER_NONCE)
    assert server.first(_CLIENT_FIRST) == _SERVER_FIRST
    assert server.user == "user"
    assert server.final(_CLIENT_FINAL) == _SERVER_FINAL


def test_rfc_7677_vector_with_a_wrong_stored_password_fails() -> None:
    credential = scram_credential("pencils", "SCRAM-SHA-256", salt=_SALT, iterations=4096)
    server = ScramServer("SCRAM-SHA-256", {"user": credential}.get, server_nonce=_SERVER_NONCE)
    server.first(_CLIENT_FIRST)
    with pytest.raises(ScramError, match="wrong password"):
        server.final(_CLIENT_FINAL)


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_a_client_logs_in_and_checks_the_server(mechanism: str) -> None:
    server = _server(mechanism, _users(alice="s3cret"))
    client = ScramClient("alice", "s3cret", mechanism)
    client.process_server_first_message(server.first(client.first_message()))
    answer = server.final(client.final_message())
    client.process_server_final_message(answer)  # raises if the server's proof is wrong
    assert server.user == "alice"


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_wrong_password_fails_at_the_proof(mechanism: str) -> None:
    server = _server(mechanism, _users(alice="s3cret"))
    client = ScramClient("alice", "guess", mechanism)
    client.process_server_first_message(server.first(client.first_message()))
    with pytest.raises(ScramError, match="wrong password"):
        server.final(client.final_message())


def test_unknown_user_gets_a_stable_fake_salt_and_fails() -> None:
    users = _users(alice="s3cret")
    answers = []
    for _ in range(2):
        server = _server("SCRAM-SHA-512", users)
        client = ScramClient("mallory", "x", "SCRAM-SHA-512")
        first = server.first(client.first_message())
        answers.append(first.split(b",", 1)[1])  # salt and iterations, not the nonce
        client.process_server_first_message(first)
        with pytest.raises(ScramError):
            server.final(client.final_message())
    assert answers[0] == answers[1]
    assert answers[0].endswith(b",i=4096")


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"\xff\xfe",
        b"p=tls-unique,,n=alice,r=abc",
        b"n,,r=abc,n=alice",
        b"n,,n=alice",
        b"n,,n=alice,r=",
        b"n,,n=,r=abc",
        b"n,,n=al=ice,r=abc",
        b"n,a=bob,n=alice,r=abc",
        b"n,,n=alice,r=abc,tokenauth=true",
        b"n,,n=alice,r=abc,junk",
        b"n,,n=alice,r=" + b"x" * 5000,
    ],
)
def test_malformed_client_first_messages_are_refused(message: bytes) -> None:
    with pytest.raises(ScramError):
        _server("SCRAM-SHA-256", _users(alice="s3cret")).first(message)


@pytest.mark.parametrize(
    "final",
    [
        b"c=biws,r={nonce}",
        b"c=eSws,r={nonce},p=AAAA",
        b"c=biws,r=other,p=AAAA",
        b"c=biws,r={nonce},p=not base64!",
        b"c=biws,r={nonce},p=AAAA",
        b"r={nonce},c=biws,p=AAAA",
    ],
)
def test_malformed_client_final_messages_are_refused(final: bytes) -> None:
    server = _server("SCRAM-SHA-256", _users(alice="s3cret"))
    nonce = server.first(b"n,,n=alice,r=abc").split(b",")[0][2:]
    with pytest.raises(ScramError):
        server.final(final.replace(b"{nonce}", nonce))


def test_messages_out_of_order_are_refused() -> None:
    server = _server("SCRAM-SHA-256", _users(alice="s3cret"))
    with pytest.raises(ScramError, match="out of order"):
        server.final(b"c=biws,r=abc,p=AAAA")
    server = _server("SCRAM-SHA-256", _users(alice="s3cret"))
    server.first(b"n,,n=alice,r=abc")
    with pytest.raises(ScramError, match="twice"):
        server.first(b"n,,n=alice,r=abc")


def test_escaped_names_and_a_matching_authzid() -> None:
    users = _users(**{"a,b=c": "pw"})
    server = _server("SCRAM-SHA-256", users)
    server.first(b"n,a=a=2Cb=3Dc,n=a=2Cb=3Dc,r=abc")
    assert server.user == "a,b=c"


def test_unknown_mechanism() -> None:
    with pytest.raises(ScramError):
        ScramServer("SCRAM-SHA-1", lambda _user: None)


def test_credentials_round_trip_in_the_user_record() -> None:
    scram = scram_credentials("pw")
    assert set(scram) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert scram["SCRAM-SHA-256"].salt != scram["SCRAM-SHA-512"].salt
    record = UserRecord("alice", 1, password="$argon2id$x", scram=MappingProxyType(scram))
    parsed = UserRecord.from_json(record.to_json())
    assert dict(parsed.scram) == scram
    assert UserRecord.from_json(UserRecord("bob", 1).to_json()).scram == {}
    assert b"scram" not in UserRecord("bob", 1).to_json()


def test_a_malformed_stored_credential_is_refused() -> None:
    good = scram_credential("pw", "SCRAM-SHA-256").to_json()
    for bad in ({**good, "iterations": 0}, {**good, "salt": "!!"}, {"salt": good["salt"]}):
        with pytest.raises((ValueError, KeyError)):
            ScramCredential.from_json(bad)


async def test_the_store_writes_scram_credentials_with_the_password() -> None:
    etcd = MemoryMetadataStore()
    store = SecurityStore(etcd, KS, hasher=FAST)
    cache = SecurityCache(etcd, KS, hasher=FAST)
    await cache.start()
    try:
        _, _, revision = await store.create_user("alice", password="pw")
        await cache.wait_for_revision(revision)
        first = cache.scram_credential("alice", "SCRAM-SHA-512")
        assert first is not None
        server = ScramServer(
            "SCRAM-SHA-512", lambda user: cache.scram_credential(user, "SCRAM-SHA-512")
        )
        client = ScramClient("alice", "pw", "SCRAM-SHA-512")
        client.process_server_first_message(server.first(client.first_message()))
        client.process_server_final_message(server.final(client.final_message()))
        await cache.wait_for_revision(await store.set_password("alice", "new"))
        second = cache.scram_credential("alice", "SCRAM-SHA-256")
        assert second is not None
        assert second.salt != first.salt
        assert second == (await store.get_user("alice")).scram["SCRAM-SHA-256"]
        await cache.wait_for_revision(await store.set_password("alice", None))
        assert cache.scram_credential("alice", "SCRAM-SHA-256") is None
        assert cache.scram_credential("nobody", "SCRAM-SHA-256") is None
    finally:
        await cache.stop()
        await etcd.aclose()
