"""The shared byte-rate limiter (yak.security.rate_limiter, the Kafka listener's quotas) on a fake
clock: sustained rate, burst, Retry-After, isolation."""

from __future__ import annotations

import pytest

from yak.security.rate_limiter import RateLimiter, TokenBucket, retry_after_s


def _run(limiter: RateLimiter, principal: str, size: int, seconds: float, step: float) -> int:
    """A client that sends ``size``-byte requests whenever it is admitted; bytes admitted."""
    now, sent = 0.0, 0
    while now < seconds:
        if limiter.delay(principal, now) == 0:
            limiter.charge(principal, size, now)
            sent += size
        now += step
    return sent


def test_sustained_rate_is_the_quota() -> None:
    limiter = RateLimiter(lambda _p: 10_000, burst_s=1.0)
    sent = _run(limiter, "User:a", 3_000, seconds=100, step=0.01)
    # 100 s at 10 kB/s, plus the 1 s burst and at most one request of debt
    assert 100 * 10_000 <= sent <= 101 * 10_000 + 3_000


def test_a_quiet_principal_may_send_its_burst_at_once() -> None:
    limiter = RateLimiter(lambda _p: 1_000, burst_s=2.0)
    admitted = 0
    while limiter.delay("User:a", 0.0) == 0:
        limiter.charge("User:a", 500, 0.0)
        admitted += 500
    assert admitted == 2_000 + 500  # the burst, and the request that went into debt


def test_the_delay_repays_the_debt() -> None:
    bucket = TokenBucket(rate=1_000, burst=1_000, now=0.0)
    bucket.charge(3_500, 0.0)  # 2,500 bytes of debt
    assert bucket.delay(0.0) == pytest.approx(2.5)
    assert bucket.delay(1.0) == pytest.approx(1.5)
    assert bucket.delay(2.5) == 0.0
    assert retry_after_s(2.5) == 3
    assert retry_after_s(2.0) == 2
    assert retry_after_s(0.001) == 1


def test_principals_are_isolated() -> None:
    rates = {"User:slow": 100, "User:fast": 0}
    limiter = RateLimiter(lambda p: rates[p])
    limiter.charge("User:slow", 1_000, 0.0)
    assert limiter.delay("User:slow", 0.0) == pytest.approx(9.0)
    assert limiter.delay("User:fast", 0.0) == 0.0  # unlimited, no bucket at all
    limiter.charge("User:fast", 10**9, 0.0)
    assert limiter.delay("User:fast", 0.0) == 0.0
    assert len(limiter) == 1


def test_a_changed_quota_applies_at_once() -> None:
    rates = {"User:a": 100}
    limiter = RateLimiter(lambda p: rates[p])
    limiter.charge("User:a", 1_000, 0.0)
    assert limiter.delay("User:a", 0.0) > 0
    rates["User:a"] = 10_000  # a new override: a new, full bucket
    assert limiter.delay("User:a", 0.0) == 0.0
    rates["User:a"] = 0  # unlimited
    limiter.charge("User:a", 10**9, 0.0)
    assert limiter.delay("User:a", 0.0) == 0.0


def test_full_buckets_are_forgotten() -> None:
    limiter = RateLimiter(lambda _p: 1_000)
    for index in range(2_000):
        assert limiter.delay(f"User:u{index}", float(index)) == 0
        limiter.charge(f"User:u{index}", 10, float(index))
    assert len(limiter) < 1_000  # a sweep dropped the refilled buckets


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        TokenBucket(rate=0, burst=1, now=0)
    with pytest.raises(ValueError, match="positive"):
        RateLimiter(lambda _p: 1, burst_s=0)
