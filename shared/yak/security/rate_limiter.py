"""Byte-rate limiting for quotas: one token bucket per principal, on an injected clock.

A bucket holds up to ``burst`` bytes of credit and refills at ``rate`` bytes per second. As in
Kafka's quota manager, a request is admitted while the bucket is not in debt and its bytes are
charged *after* the fact (its size is only known once the body is read or the records are
fetched), so the bucket may go below zero by one request; the next request then waits until
the debt is repaid: ``delay = -tokens / rate``. Over any long window the admitted bytes are at
most ``burst + rate * window`` plus one request, and a client that waits the delays it is told
gets exactly ``rate`` (Kafka's KIP-599 bucket works the same way).

Pure: no asyncio, no clock of its own — every call takes ``now`` (monotonic seconds), so tests
step time by hand. Not thread-safe; each service calls it from its one event loop. The
rest-proxy's quotas (``yak_rest_proxy.quotas``) and the brokers' Kafka listener
(``yak_broker.kafka.quotas``) both use it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["RateLimiter", "TokenBucket", "retry_after_s"]

#: Every this many checks, full buckets are forgotten: a full bucket is a new one (bounded
#: memory however many principals come and go).
_SWEEP_EVERY = 1024


def retry_after_s(delay_s: float) -> int:
    """The ``Retry-After`` value of a delay: whole seconds, rounded up, at least 1."""
    return max(1, math.ceil(delay_s - 1e-9))


class TokenBucket:
    """Credit in bytes for one principal; see the module docstring."""

    __slots__ = ("burst", "rate", "tokens", "updated")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        if rate <= 0 or burst <= 0:
            raise ValueError("rate and burst must be positive")
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.updated = now

    def _refill(self, now: float) -> None:
        if now > self.updated:
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
            self.updated = now

    def delay(self, now: float) -> float:
        """Seconds until a request may be admitted (0: now)."""
        self._refill(now)
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate

    def charge(self, size: int, now: float) -> None:
        """Take ``size`` bytes of credit (the bucket may go into debt)."""
        self._refill(now)
        self.tokens -= size

    def full(self, now: float) -> bool:
        """Whether the bucket holds its whole burst (the same as a new bucket)."""
        self._refill(now)
        return self.tokens >= self.burst


class RateLimiter:
    """Token buckets by principal for one kind of traffic (produce or fetch bytes).

    ``rate_of(principal)`` gives the principal's quota in bytes per second (0: unlimited); it
    is asked on every check, so a changed quota takes effect at once (the bucket is rebuilt
    with the new rate, full). ``burst_s`` is how many seconds of quota a quiet principal may
    send at once.
    """

    def __init__(self, rate_of: Callable[[str], int], *, burst_s: float = 1.0) -> None:
        if burst_s <= 0:
            raise ValueError("burst_s must be positive")
        self._rate_of = rate_of
        self._burst_s = burst_s
        self._buckets: dict[str, TokenBucket] = {}
        self._calls = 0

    def _bucket(self, principal: str, now: float) -> TokenBucket | None:
        rate = self._rate_of(principal)
        bucket = self._buckets.get(principal)
        if rate <= 0:
            if bucket is not None:
                del self._buckets[principal]
            return None
        if bucket is None or bucket.rate != rate:
            bucket = TokenBucket(rate, rate * self._burst_s, now)
            self._buckets[principal] = bucket
        return bucket

    def delay(self, principal: str, now: float) -> float:
        """Seconds the principal must wait before its next request (0: admit it now)."""
        self._calls += 1
        if self._calls % _SWEEP_EVERY == 0:
            self._sweep(now)
        bucket = self._bucket(principal, now)
        return 0.0 if bucket is None else bucket.delay(now)

    def credit(self, principal: str, now: float) -> float | None:
        """The principal's credit in bytes now (below 0: in debt), None if it is unlimited."""
        bucket = self._bucket(principal, now)
        if bucket is None:
            return None
        bucket.delay(now)  # refills
        return bucket.tokens

    def charge(self, principal: str, size: int, now: float) -> None:
        """Count ``size`` bytes the principal sent or received."""
        bucket = self._bucket(principal, now)
        if bucket is not None:
            bucket.charge(size, now)

    def _sweep(self, now: float) -> None:
        full = [principal for principal, bucket in self._buckets.items() if bucket.full(now)]
        for principal in full:
            del self._buckets[principal]

    def __len__(self) -> int:
        return len(self._buckets)
