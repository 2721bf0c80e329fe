"""``FailedLoginLimiter`` on its own, and inside ``SecurityCache`` (in-memory store)."""

from __future__ import annotations

import pytest
from argon2 import PasswordHasher

from yak.clock import FakeClock
from yak.errors import AuthenticationError, AuthenticationThrottledError
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.security import SecurityCache, SecurityStore
from yak.security.login_limiter import FailedLoginLimiter, retry_after_header

KS = Keyspace("limits")
FAST = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)


def test_failures_in_the_window_refuse_the_key_until_the_oldest_leaves() -> None:
    limiter = FailedLoginLimiter(3, 60)
    for at in (0.0, 10.0, 20.0):
        assert limiter.retry_after("user:alice", at) == 0
        limiter.failed("user:alice", at)
    assert limiter.retry_after("user:alice", 30.0) == pytest.approx(30.0)  # 0 + 60 - 30
    assert limiter.retry_after("user:bob", 30.0) == 0
    assert limiter.retry_after("user:alice", 60.0) == 0  # the first failure left the window
    limiter.failed("user:alice", 61.0)
    assert limiter.retry_after("user:alice", 61.0) == pytest.approx(9.0)  # 10 + 60 - 61
    limiter.succeeded("user:alice")
    assert limiter.retry_after("user:alice", 61.0) == 0
    assert retry_after_header(9.2) == 10
    assert retry_after_header(0.01) == 1


def test_zero_switches_it_off_and_memory_is_bounded() -> None:
    off = FailedLoginLimiter(0, 60)
    for _ in range(100):
        off.failed("ip:1.2.3.4", 0.0)
    assert off.retry_after("ip:1.2.3.4", 0.0) == 0
    assert len(off) == 0
    small = FailedLoginLimiter(2, 60, max_keys=10)
    for index in range(50):
        small.failed(f"ip:{index}", float(index))
    assert len(small) <= 10
    with pytest.raises(ValueError, match="max_failures"):
        FailedLoginLimiter(-1, 60)


def test_settings_from_the_environment() -> None:
    default = FailedLoginLimiter.from_env({})
    assert (default.max_failures, default.window_s) == (10, 60.0)
    given = FailedLoginLimiter.from_env(
        {"YAK_AUTH_MAX_FAILURES": "3", "YAK_AUTH_FAILURE_WINDOW_S": "5"}
    )
    assert (given.max_failures, given.window_s) == (3, 5.0)


async def test_the_cache_refuses_a_user_after_failed_checks_but_not_a_remembered_key() -> None:
    etcd = MemoryMetadataStore()
    clock = FakeClock()
    cache = SecurityCache(
        etcd, KS, hasher=FAST, clock=clock, login_limiter=FailedLoginLimiter(2, 60)
    )
    await cache.start()
    try:
        users = SecurityStore(etcd, KS, hasher=FAST)
        _, key, revision = await users.create_user("alice", password="right", with_key=True)
        assert key is not None
        await cache.wait_for_revision(revision)
        assert await cache.authenticate_api_key(key.token) == "User:alice"  # remembered
        for _ in range(2):
            with pytest.raises(AuthenticationError):
                await cache.authenticate_password("alice", "wrong")
        with pytest.raises(AuthenticationThrottledError) as refused:
            await cache.authenticate_password("alice", "right")
        assert refused.value.http_status == 429
        assert refused.value.details["retry_after_s"] == 60
        assert await cache.authenticate_api_key(key.token) == "User:alice"  # another key
        with pytest.raises(AuthenticationError):  # unknown users cost nothing: not counted
            await cache.authenticate_password("nobody", "x")
        clock.advance(60.0)
        assert await cache.authenticate_password("alice", "right") == "User:alice"
    finally:
        await cache.stop()
        await etcd.aclose()
