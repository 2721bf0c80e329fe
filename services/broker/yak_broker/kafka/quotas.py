"""``KafkaQuotas``: the REST routes' per-principal byte-rate quotas, applied the Kafka way.

Each principal's produce and fetch rate is its override in etcd (``security/quotas/<principal>``,
followed by ``QuotaOverrides``), else the broker's default (``YAK_QUOTA_PRODUCE_BYTES_PER_S``,
``YAK_QUOTA_FETCH_BYTES_PER_S``, the same names as the proxy's; 0 unlimited, the default) —
the values the proxies enforce, so ``yak quotas set`` holds a principal to one rate on every
door. Without SASL every client is ``User:ANONYMOUS``, as on the proxy with security off.
Quotas are per broker, as Kafka's are (and the proxy's per proxy).

The Kafka way (KIP-13/KIP-219) instead of the proxy's 429: a Produce or Fetch is served, its
bytes (the produced batches, the fetched records) are charged to the principal's token bucket
(``yak.security.rate_limiter``: burst of one second of quota), and while the bucket is in debt
the answer carries ``throttle_time_ms`` — the time until the debt is repaid — and is *held*
that long before it is written. The connection's later answers wait behind it (answers go out
in request order), so a client that ignores ``throttle_time_ms`` is slowed all the same, as
Kafka's muted channel does. With no default and no override ``throttle`` returns 0 after one
attribute test. Single event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING

from yak.clock import Clock, SystemClock
from yak.security.quota_overrides import QuotaOverrides
from yak.security.quota_store import QuotaConfig
from yak.security.rate_limiter import RateLimiter

if TYPE_CHECKING:
    from yak_broker.server.broker import Broker

__all__ = ["MAX_THROTTLE_MS", "KafkaQuotas", "QuotaKind"]

#: The longest an answer is held (Kafka caps throttling at the request timeout; 30 s is its
#: default ``request.timeout.ms``, beyond which clients give up on the answer).
MAX_THROTTLE_MS = 30_000
_NONE = QuotaConfig()


class QuotaKind(Enum):
    PRODUCE = "produce"
    FETCH = "fetch"


class KafkaQuotas:
    """Byte-rate buckets by principal for the Kafka listener; see the module docstring."""

    def __init__(
        self,
        overrides: QuotaOverrides | None,
        *,
        produce_bytes_per_s: int = 0,
        fetch_bytes_per_s: int = 0,
        clock: Clock | None = None,
    ) -> None:
        self.overrides = overrides
        self._defaults = {
            QuotaKind.PRODUCE: produce_bytes_per_s,
            QuotaKind.FETCH: fetch_bytes_per_s,
        }
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._limiters = {kind: RateLimiter(self._rate_of(kind)) for kind in QuotaKind}

    def _rate_of(self, kind: QuotaKind) -> Callable[[str], int]:
        return lambda principal: self.rate(kind, principal)

    @classmethod
    def of_broker(cls, broker: Broker) -> KafkaQuotas:
        settings = broker.settings
        return cls(
            QuotaOverrides(broker.metadata_store, broker.keyspace),
            produce_bytes_per_s=settings.quota_produce_bytes_per_s,
            fetch_bytes_per_s=settings.quota_fetch_bytes_per_s,
        )

    async def start(self) -> None:
        if self.overrides is not None:
            await self.overrides.start()

    async def stop(self) -> None:
        if self.overrides is not None:
            await self.overrides.stop()

    @property
    def active(self) -> bool:
        """Whether any quota applies (a default or any override)."""
        return any(self._defaults.values()) or bool(
            self.overrides is not None and self.overrides.overrides
        )

    def rate(self, kind: QuotaKind, principal: str) -> int:
        """The principal's quota in bytes per second (0: unlimited)."""
        found = _NONE if self.overrides is None else self.overrides.overrides.get(principal, _NONE)
        given = found.produce_bytes_per_s if kind is QuotaKind.PRODUCE else found.fetch_bytes_per_s
        return self._defaults[kind] if given is None else given

    def throttle_ms(self, kind: QuotaKind, principal: str, size: int) -> int:
        """Charge ``size`` bytes; the answer's ``throttle_time_ms`` (0: not throttled)."""
        if not self.active:
            return 0
        limiter, now = self._limiters[kind], self.clock.monotonic()
        limiter.charge(principal, size, now)
        return min(MAX_THROTTLE_MS, round(limiter.delay(principal, now) * 1000))

    async def hold(self, throttle_ms: int) -> None:
        """Hold the answer for its throttle time."""
        if throttle_ms > 0:
            await self.clock.sleep(throttle_ms / 1000)

    async def throttle(self, kind: QuotaKind, principal: str, size: int) -> int:
        """Charge ``principal`` ``size`` bytes and hold the answer while it is over its quota;
        the answer's ``throttle_time_ms``."""
        throttle_ms = self.throttle_ms(kind, principal, size)
        if throttle_ms > 0:
            await self.clock.sleep(throttle_ms / 1000)
        return throttle_ms
