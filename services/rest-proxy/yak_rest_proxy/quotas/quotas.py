"""``Quotas``: per-principal produce and fetch byte rates, enforced by this proxy.

Like Kafka's client quotas, with the principal as the quota entity: each principal's rate is
its override in etcd (``quota_store``), else the proxy's default (``YAK_QUOTA_PRODUCE_BYTES_PER_S``,
``YAK_QUOTA_FETCH_BYTES_PER_S``; 0 is unlimited, the default). With security off every client
is one principal, ``User:ANONYMOUS``. Quotas are **per proxy**, as Kafka's are per broker: a
principal spread over N proxies may reach N times its quota.

Routes call ``admit(kind)`` before the work — it raises ``ThrottlingQuotaExceededError``
(429 + ``Retry-After``) while the principal's bucket is in debt — and ``charge`` with the bytes
once known: a produce request's body, a fetch answer's body. With no default and no override
``admit`` is one attribute test and returns None, so the produce path pays nothing more.
``admit`` also notes the quota it applied, so the answer carries ``RateLimit-*`` headers
(``usage``; ``http.ratelimit_headers``).

Streams (SSE ``/stream`` and WebSocket ``/ws`` consumers) are throttled the Kafka way instead:
before each poll ``throttle`` *waits* until the principal's bucket is out of debt, and each
event's bytes are charged. A stream holds its connection anyway, and nothing in it times out
on a late event, so there is no 429 to answer; the client simply receives at its quota.
Single event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from functools import partial

from yak.clock import Clock, SystemClock
from yak.errors import ThrottlingQuotaExceededError
from yak.security.quota_overrides import QuotaOverrides
from yak.security.quota_store import QuotaConfig
from yak.security.rate_limiter import RateLimiter, retry_after_s
from yak_rest_proxy.http.ratelimit_headers import RateLimitState, note_rate_limit
from yak_rest_proxy.security.access import ANONYMOUS, current_access

__all__ = ["ANONYMOUS", "QuotaKind", "Quotas"]


class QuotaKind(Enum):
    """The two byte rates a principal is held to."""

    PRODUCE = "produce"
    FETCH = "fetch"


class Quotas:
    """Byte-rate limiters by principal; see the module docstring."""

    def __init__(
        self,
        overrides: QuotaOverrides,
        *,
        produce_bytes_per_s: int = 0,
        fetch_bytes_per_s: int = 0,
        burst_s: float = 1.0,
        clock: Clock | None = None,
    ) -> None:
        self._overrides = overrides
        self._defaults = {
            QuotaKind.PRODUCE: produce_bytes_per_s,
            QuotaKind.FETCH: fetch_bytes_per_s,
        }
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._burst_s = burst_s
        self._limiters = {
            kind: RateLimiter(self._rate_getter(kind), burst_s=burst_s) for kind in QuotaKind
        }

    def _rate_getter(self, kind: QuotaKind) -> Callable[[str], int]:
        return lambda principal: self.rate(kind, principal)

    @property
    def active(self) -> bool:
        """Whether any quota applies (a default or any override)."""
        return bool(self._overrides.overrides) or any(self._defaults.values())

    def rate(self, kind: QuotaKind, principal: str) -> int:
        """The principal's quota in bytes per second (0: unlimited)."""
        override = self._overrides.overrides.get(principal, _NONE)
        given = (
            override.produce_bytes_per_s
            if kind is QuotaKind.PRODUCE
            else override.fetch_bytes_per_s
        )
        return self._defaults[kind] if given is None else given

    def admit(self, kind: QuotaKind) -> str | None:
        """The request's principal if quotas apply (None if not); 429 while it is over."""
        if not self.active:
            return None
        principal = self.principal()
        note_rate_limit(partial(self.usage, kind, principal))
        delay = self._limiters[kind].delay(principal, self._clock.monotonic())
        if delay > 0:
            wait = retry_after_s(delay)
            rate = self.rate(kind, principal)
            raise ThrottlingQuotaExceededError(
                f"{principal} is over its {kind.value} quota of {rate:,} bytes/s on this "
                f"proxy; retry in {wait} s",
                quota=kind.value,
                bytes_per_s=rate,
                retry_after_s=wait,
                retry_after_ms=max(1, round(delay * 1000)),
            )
        return principal

    def usage(self, kind: QuotaKind, principal: str) -> RateLimitState | None:
        """What is left of the principal's quota now (None: it has none), for the
        ``RateLimit-*`` headers (``http.ratelimit_headers``)."""
        credit = self._limiters[kind].credit(principal, self._clock.monotonic())
        if credit is None:
            return None
        return RateLimitState.of_bucket(self.rate(kind, principal), self._burst_s, credit)

    @staticmethod
    def principal() -> str:
        """The request's principal (``User:ANONYMOUS`` with security off)."""
        access = current_access.get()
        return ANONYMOUS if access is None else access.principal

    async def throttle(self, kind: QuotaKind, principal: str) -> None:
        """Wait until ``principal`` is out of debt for ``kind`` (streams; see the docstring)."""
        while self.active:
            delay = self._limiters[kind].delay(principal, self._clock.monotonic())
            if delay <= 0:
                return
            await self._clock.sleep(delay)  # the debt is repaid at a known rate: a timed wait

    def charge(self, kind: QuotaKind, principal: str | None, size: int) -> None:
        """Count ``size`` bytes against the principal ``admit`` returned (None: no-op)."""
        if principal is not None:
            self._limiters[kind].charge(principal, size, self._clock.monotonic())


_NONE = QuotaConfig()
