"""What every page shares: the template renderer, its filters, the read-only and role checks,
and the API clients of the request's user.

``Pages`` is built once per app and handed to each page's router factory. ``render`` adds
the context the base layout needs (settings, the latest sample for the health banner, the
active navigation entry, the logged-in user, what they may change and their CSRF token).
With security off there is no session: ``api`` is the console's own clients and every change
is allowed unless the console is read-only. Pages render from the sampler's latest sample
where they can, so rendering costs no API round trip.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from yak import __version__
from yak.api.admin import TopicDescription
from yak.errors import YakError
from yak_console.auth.guard import ConsoleRoleError
from yak_console.auth.roles import Permit
from yak_console.auth.sessions import Session, SessionStore
from yak_console.runtime import ApiClients, ConsoleRuntime
from yak_console.timestamps import format_ago, format_timestamp

__all__ = [
    "ConsoleReadOnlyError",
    "Pages",
    "format_bytes",
    "format_number",
    "format_rate",
    "format_timestamp",
]

_TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


class ConsoleReadOnlyError(YakError):
    """A change was asked of a console configured read-only."""

    code = "CONSOLE_READ_ONLY"
    http_status = 403


def format_bytes(value: float | int | None) -> str:
    """``1536`` → ``1.5 KiB``."""
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def format_number(value: float | int | None) -> str:
    """``1234567`` → ``1,234,567``."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if isinstance(value, float) else f"{value:,}"


def format_rate(value: float | None) -> str:
    """Records per second, short: ``0``, ``12.5/s``, ``3.4k/s``."""
    if value is None or math.isnan(value):
        return "-"
    if value >= 1000:
        return f"{value / 1000:.1f}k/s"
    return f"{value:.1f}/s" if value else "0/s"


def _ago(ms: int | None) -> str:
    """The ``ago`` filter: ``format_ago`` against the time the page is rendered."""
    return format_ago(ms, time.time_ns() // 1_000_000)


class Pages:
    """The renderer every page uses."""

    def __init__(self, runtime: ConsoleRuntime, sessions: SessionStore | None = None) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self.sessions = sessions
        self.templates = Jinja2Templates(directory=str(_TEMPLATES))
        env = self.templates.env
        env.filters["bytes"] = format_bytes
        env.filters["number"] = format_number
        env.filters["rate"] = format_rate
        env.filters["timestamp"] = format_timestamp
        env.filters["ago"] = _ago
        env.globals["version"] = __version__

    @staticmethod
    def session(request: Request) -> Session | None:
        """The request's session (set by the guard; None with security off)."""
        session = getattr(request.state, "session", None)
        return session if isinstance(session, Session) else None

    def api(self, request: Request) -> ApiClients:
        """The clients to call the public API with on behalf of the request's user."""
        session = self.session(request)
        if session is None:
            return self.runtime.clients
        assert isinstance(session.clients, ApiClients)
        return session.clients

    def can(self, request: Request) -> dict[str, bool]:
        """Each ``Permit`` → whether this request's user may do it here."""
        if self.settings.read_only:
            return {permit.value: False for permit in Permit}
        session = self.session(request)
        permits = frozenset(Permit) if session is None else session.permits
        return {permit.value: permit in permits for permit in Permit}

    def require(self, request: Request, permit: Permit) -> None:
        """Raise ``ConsoleReadOnlyError`` or ``ConsoleRoleError`` unless ``permit`` is allowed."""
        if self.settings.read_only:
            raise ConsoleReadOnlyError("this console is read-only (YAK_CONSOLE_READ_ONLY)")
        session = self.session(request)
        if session is not None and permit not in session.permits:
            raise ConsoleRoleError(
                f"{session.principal} has the console role {session.role}, which may not "
                f"{permit.value.replace('_', ' ')}"
            )

    async def describe_topic(self, request: Request, name: str) -> TopicDescription:
        """A topic as the user may see it (their own call with security on; otherwise the
        directory's recent description)."""
        if self.session(request) is None:
            return await self.runtime.topics.describe(name)
        described = await self.api(request).admin.describe_topic(name)
        self.runtime.topics.remember(described)
        return described

    def render(
        self,
        request: Request,
        template: str,
        *,
        nav: str = "",
        status_code: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        """Render ``template`` with the layout's context (``sample``, ``settings``, ``nav``)."""
        context.setdefault("sample", self.runtime.sampler.latest)
        session = self.session(request)
        context.update(
            settings=self.settings,
            nav=nav,
            read_only=self.settings.read_only,
            can=self.can(request),
            user=session,
            csrf_token=session.csrf_token if session is not None else "",
        )
        return self.templates.TemplateResponse(request, template, context, status_code=status_code)
