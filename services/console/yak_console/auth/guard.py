"""The console's guard: with security on, every route but the public ones needs a session, and
every POST the session's CSRF token.

Installed as an app-wide dependency (so it runs for every page route, after routing and before
the handler). Public: ``/login``, ``/healthz``, ``/readyz``, ``/favicon.ico`` and ``/static/*``
(a mount, outside the dependency). The CSRF token comes from the ``X-CSRF-Token`` header (htmx
sends it from ``hx-headers`` on ``<body>``) or the form field ``csrf_token`` (plain forms); the
form read here stays cached on the request for the handler. Refusals are typed errors that the
app's error table turns into a redirect to the login page (``LoginRequiredError``) or a 403
page (``CsrfError``, ``ConsoleRoleError``).
"""

from __future__ import annotations

from fastapi import Request

from yak.errors import YakError
from yak_console.auth.sessions import SessionStore

__all__ = [
    "COOKIE",
    "CSRF_FIELD",
    "CSRF_HEADER",
    "PUBLIC_PATHS",
    "ConsoleGuard",
    "ConsoleRoleError",
    "CsrfError",
    "LoginRequiredError",
]

COOKIE = "yak_console_session"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
PUBLIC_PATHS = frozenset({"/login", "/healthz", "/readyz", "/favicon.ico"})


class LoginRequiredError(YakError):
    """No session, or an expired or ended one."""

    code = "LOGIN_REQUIRED"
    http_status = 401


class CsrfError(YakError):
    """A POST without this session's CSRF token."""

    code = "CSRF_TOKEN_INVALID"
    http_status = 403


class ConsoleRoleError(YakError):
    """The user's console role does not allow the change."""

    code = "CONSOLE_ROLE_FORBIDDEN"
    http_status = 403


class ConsoleGuard:
    """The app-wide dependency; see the module docstring."""

    def __init__(self, sessions: SessionStore) -> None:
        self._sessions = sessions

    async def __call__(self, request: Request) -> None:
        path = request.url.path
        if path in PUBLIC_PATHS or path.startswith("/static/"):
            return
        session = await self._sessions.find(request.cookies.get(COOKIE))
        if session is None:
            raise LoginRequiredError("log in to use the console")
        request.state.session = session
        if request.method != "POST":
            return
        token = request.headers.get(CSRF_HEADER)
        if token is None:
            value = (await request.form()).get(CSRF_FIELD)
            token = value if isinstance(value, str) else None
        if not session.check_csrf(token):
            raise CsrfError(
                "this form's CSRF token is missing or wrong (an old page, or a request from "
                "another site): reload the page and try again"
            )
