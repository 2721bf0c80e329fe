"""API key tokens, argon2id hashing and the stored user record."""

from __future__ import annotations

from types import MappingProxyType

from argon2 import PasswordHasher

from yak.security import (
    StoredKey,
    UserRecord,
    hash_secret,
    new_api_key,
    parse_api_key,
    verify_secret,
)

FAST = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)


def test_a_new_key_parses_back() -> None:
    key = new_api_key()
    assert key.token.startswith(f"yak_{key.key_id}_")
    assert parse_api_key(key.token) == key
    assert parse_api_key(f"  {key.token}\n") == key
    assert new_api_key().key_id != key.key_id


def test_malformed_tokens() -> None:
    key = new_api_key()
    for bad in (
        "",
        "yak_",
        key.token.replace("yak_", "kay_"),
        f"yak_{key.key_id[:-1]}_{key.secret}",
        f"yak_{key.key_id.upper()}_{key.secret}",
        f"yak_{key.key_id}_short",
        f"yak_{key.key_id}_{key.secret}!",
    ):
        assert parse_api_key(bad) is None, bad


def test_hashes_are_argon2id_salted_and_verify() -> None:
    first = hash_secret("s3cret", FAST)
    second = hash_secret("s3cret", FAST)
    assert first.startswith("$argon2id$")
    assert first != second  # a salt each
    assert verify_secret(first, "s3cret", FAST)
    assert not verify_secret(first, "s3cret!", FAST)
    assert not verify_secret("not a hash", "s3cret", FAST)


def test_default_hasher_is_argon2id() -> None:
    assert hash_secret("x").startswith("$argon2id$v=19$m=65536,t=3,p=4$")


def test_user_record_round_trip_and_keys() -> None:
    record = UserRecord("alice", 1, password="$argon2id$p").with_key(
        "00112233aabbccdd", StoredKey("$argon2id$k", 2, "ci")
    )
    assert record.principal == "User:alice"
    assert UserRecord.from_json(record.to_json()) == record
    assert record.without_key("00112233aabbccdd").keys == MappingProxyType({})
    assert b"s3cret" not in record.to_json()
