"""``RateLimit-*`` headers: what is left of the principal's quota, on every answer it applies to.

The fields of the IETF draft draft-ietf-httpapi-ratelimit-headers up to its -06 revision, one
header each — the form most clients and libraries read (express-rate-limit's ``draft-6``,
Kong, Envoy), rather than the later drafts' combined structured ``RateLimit`` field::

    RateLimit-Limit: 1048576          the quota's burst in bytes (rate x burst seconds)
    RateLimit-Remaining: 524288       bytes the principal may send (or fetch) now
    RateLimit-Reset: 1                seconds until the bucket is full again
    RateLimit-Policy: 1048576;w=1     the limit and its window, in seconds

The quota unit is bytes, not requests: the proxy's quotas are byte rates
(``quotas.quotas.Quotas``, a token bucket per principal). A 429 over a quota carries them too
(``Remaining: 0``) beside its ``Retry-After``.

A route's ``Quotas.admit`` notes, through ``note_rate_limit``, how to read the state of the
quota it applied (a callable, read when the answer starts, so a produce's bytes charged after
the body was read are counted). ``RateLimitHeaders``, a pure ASGI middleware in the app's
front (the fast lane's answers get the headers too), gives each request a fresh note list in a
``ContextVar`` and adds the headers of the last note to the answer. Requests no quota applied
to get none; while no quota is configured at all the middleware is one call and a branch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextvars import ContextVar
from typing import NamedTuple

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["RateLimitHeaders", "RateLimitState", "note_rate_limit", "rate_limit_headers"]


class RateLimitState(NamedTuple):
    """A principal's quota as the headers state it (bytes and seconds)."""

    limit: int
    remaining: int
    reset_s: int
    window_s: int

    @classmethod
    def of_bucket(cls, rate: float, burst_s: float, credit: float) -> RateLimitState:
        """The state of a token bucket of ``rate`` bytes/s holding ``credit`` bytes."""
        burst = rate * burst_s
        missing = max(0.0, burst - credit)
        return cls(
            limit=int(burst),
            remaining=max(0, math.floor(credit)),
            reset_s=math.ceil(missing / rate - 1e-9) if missing > 0 else 0,
            window_s=max(1, math.ceil(burst_s)),
        )


StateOf = Callable[[], RateLimitState | None]

_noted: ContextVar[list[StateOf] | None] = ContextVar("yak_rate_limit_noted", default=None)


def note_rate_limit(state_of: StateOf) -> None:
    """Say which quota the request is held to (no-op outside ``RateLimitHeaders``)."""
    notes = _noted.get()
    if notes is not None:
        notes.append(state_of)


def rate_limit_headers(state: RateLimitState) -> list[tuple[bytes, bytes]]:
    return [
        (b"ratelimit-limit", str(state.limit).encode()),
        (b"ratelimit-remaining", str(state.remaining).encode()),
        (b"ratelimit-reset", str(state.reset_s).encode()),
        (b"ratelimit-policy", f"{state.limit};w={state.window_s}".encode()),
    ]


class RateLimitHeaders:
    """See the module docstring. ``active()`` says whether any quota is configured now."""

    def __init__(self, app: ASGIApp, active: Callable[[], bool]) -> None:
        self.app = app
        self._active = active

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._active():
            await self.app(scope, receive, send)
            return
        notes: list[StateOf] = []
        token = _noted.set(notes)

        async def send_with_state(message: Message) -> None:
            if message["type"] == "http.response.start" and notes:
                state = notes[-1]()
                if state is not None:
                    message = dict(message)
                    message["headers"] = [*message.get("headers", ()), *rate_limit_headers(state)]
            await send(message)

        try:
            await self.app(scope, receive, send_with_state)
        finally:
            _noted.reset(token)
