"""``FailedLoginLimiter``: after too many failed logins for one key, refuse it for a while.

Each credential check that fails costs an argon2 verification (64 MiB, tens of milliseconds)
and gives a guesser one more try. The limiter counts failures per key — a user name, an API
key's id, a client address — in a sliding window: once a key has ``max_failures`` failures
within ``window_s``, it is refused until the oldest of them leaves the window
(``retry_after``), without checking anything. A success forgets the key's failures.

Used by ``SecurityCache`` (the rest-proxy and the coordinator: keyed by user name for Basic
and by key id for API keys, counting only checks that reached argon2) and by the console's
login form (keyed by user name and by client address). A caller refused this way answers 429
``AUTHENTICATION_THROTTLED`` with ``Retry-After``.

Pure: the caller passes the time (a monotonic clock). Memory is bounded by ``max_keys``: past
it, keys whose failures all left the window are dropped, then the oldest keys. Single
thread/event loop.
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Mapping

__all__ = [
    "DEFAULT_MAX_FAILURES",
    "DEFAULT_WINDOW_S",
    "FailedLoginLimiter",
    "retry_after_header",
]

DEFAULT_MAX_FAILURES = 10
DEFAULT_WINDOW_S = 60.0
_MAX_KEYS = 100_000


def retry_after_header(delay_s: float) -> int:
    """Whole seconds for ``Retry-After``: rounded up, at least 1."""
    return max(1, math.ceil(delay_s - 1e-9))


class FailedLoginLimiter:
    """Failures per key in a sliding window; see the module docstring."""

    def __init__(
        self,
        max_failures: int = DEFAULT_MAX_FAILURES,
        window_s: float = DEFAULT_WINDOW_S,
        *,
        max_keys: int = _MAX_KEYS,
    ) -> None:
        if max_failures < 0 or window_s <= 0 or max_keys < 1:
            raise ValueError("need max_failures >= 0 (0: off), window_s > 0 and max_keys >= 1")
        self.max_failures = max_failures
        self.window_s = window_s
        self._max_keys = max_keys
        self._failures: dict[str, deque[float]] = {}

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> FailedLoginLimiter:
        """``YAK_AUTH_MAX_FAILURES`` (default 10; 0: off) in ``YAK_AUTH_FAILURE_WINDOW_S``
        (default 60) seconds: the services that check credentials (proxy, coordinator)."""
        env = os.environ if env is None else env
        failures = env.get("YAK_AUTH_MAX_FAILURES", "").strip()
        window = env.get("YAK_AUTH_FAILURE_WINDOW_S", "").strip()
        return cls(
            int(failures) if failures else DEFAULT_MAX_FAILURES,
            float(window) if window else DEFAULT_WINDOW_S,
        )

    @property
    def enabled(self) -> bool:
        return self.max_failures > 0

    def _recent(self, key: str, now: float) -> deque[float] | None:
        times = self._failures.get(key)
        if times is None:
            return None
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if not times:
            del self._failures[key]
            return None
        return times

    def retry_after(self, key: str, now: float) -> float:
        """Seconds until ``key`` may try again (0: now)."""
        if not self.enabled:
            return 0.0
        times = self._recent(key, now)
        if times is None or len(times) < self.max_failures:
            return 0.0
        return times[-self.max_failures] + self.window_s - now

    def failed(self, key: str, now: float) -> None:
        """Count one failure of ``key``."""
        if not self.enabled:
            return
        times = self._recent(key, now)
        if times is None:
            if len(self._failures) >= self._max_keys:
                self._shrink(now)
            times = self._failures[key] = deque(maxlen=self.max_failures)
        times.append(now)

    def succeeded(self, key: str) -> None:
        """Forget ``key``'s failures."""
        self._failures.pop(key, None)

    def _shrink(self, now: float) -> None:
        for key in list(self._failures):
            self._recent(key, now)
        while len(self._failures) >= self._max_keys:
            del self._failures[next(iter(self._failures))]

    def __len__(self) -> int:
        return len(self._failures)
