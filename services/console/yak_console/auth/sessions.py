"""Server-side console sessions, named by a signed id in a cookie.

A session holds the principal, its role, a CSRF token and the user's own API clients (which
hold the credential given at login): all in this process's memory, never in the cookie. The
cookie carries only ``<id>.<signature>``: the id is 32 random bytes (URL-safe base64), the
signature HMAC-SHA256 of the id under the console's secret, so a forged or altered cookie is
refused before any lookup. A session ends at logout, after ``idle_s`` without a request, or
``max_s`` after login, whichever comes first; its clients are closed when it ends (an expired
session is closed when next looked up or at the next login's sweep). A restart ends every
session. Used from one event loop; not thread-safe.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from yak_console.auth.roles import ROLE_PERMITS, Permit, Role

__all__ = ["Closeable", "Session", "SessionSigner", "SessionStore"]


class Closeable(Protocol):
    async def aclose(self) -> None: ...


@dataclass(slots=True)
class Session:
    """One logged-in user."""

    id: str
    principal: str
    role: Role
    csrf_token: str
    clients: Closeable
    created: float
    last_seen: float
    cookie: str = field(default="", repr=False)

    @property
    def permits(self) -> frozenset[Permit]:
        return ROLE_PERMITS[self.role]

    def check_csrf(self, token: str | None) -> bool:
        """True when ``token`` is this session's CSRF token (constant-time)."""
        return token is not None and hmac.compare_digest(token, self.csrf_token)


class SessionSigner:
    """Signs session ids (and login-form tokens) with HMAC-SHA256."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the session secret must be at least 16 bytes")
        self._secret = secret

    def _mac(self, value: str) -> str:
        digest = hmac.new(self._secret, value.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def sign(self, value: str) -> str:
        return f"{value}.{self._mac(value)}"

    def unsign(self, signed: str | None) -> str | None:
        """The value of a correctly signed string, else None."""
        if not signed:
            return None
        value, _, mac = signed.rpartition(".")
        if not value or not hmac.compare_digest(mac, self._mac(value)):
            return None
        return value


class SessionStore:
    """The console's sessions by id."""

    def __init__(
        self,
        signer: SessionSigner,
        *,
        idle_s: float,
        max_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.signer = signer
        self._idle_s = idle_s
        self._max_s = max_s
        self._clock = clock
        self._sessions: dict[str, Session] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    async def open(self, principal: str, role: Role, clients: Closeable) -> Session:
        """A new session (after sweeping the expired ones)."""
        await self.sweep()
        now = self._clock()
        session_id = secrets.token_urlsafe(32)
        session = Session(session_id, principal, role, secrets.token_urlsafe(32), clients, now, now)
        session.cookie = self.signer.sign(session_id)
        self._sessions[session_id] = session
        return session

    async def find(self, cookie: str | None) -> Session | None:
        """The live session a cookie names (refreshing its idle timer), else None."""
        session_id = self.signer.unsign(cookie)
        session = self._sessions.get(session_id) if session_id else None
        if session is None:
            return None
        now = self._clock()
        if self._expired(session, now):
            await self.end(session)
            return None
        session.last_seen = now
        return session

    async def end(self, session: Session) -> None:
        """Forget the session and close its clients (logout, expiry, a refused credential)."""
        if self._sessions.pop(session.id, None) is not None:
            await session.clients.aclose()

    async def sweep(self) -> None:
        now = self._clock()
        for session in [s for s in self._sessions.values() if self._expired(s, now)]:
            await self.end(session)

    async def aclose(self) -> None:
        for session in list(self._sessions.values()):
            await self.end(session)

    def _expired(self, session: Session, now: float) -> bool:
        return now - session.last_seen > self._idle_s or now - session.created > self._max_s
