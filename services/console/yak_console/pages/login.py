"""Login and logout (only with security on).

The login form takes a username and password, or an API key. The console checks them by
calling the public API with them (``GET /api/v1/security/whoami``): the proxy authenticates,
and its answer names the principal and whether it is a super-user, from which ``roles`` picks
the console role. The credential then lives only inside that user's API clients in the
server-side session (never in the cookie) until logout or expiry closes them. The login form
carries its own CSRF token, double-submitted in a short-lived signed cookie, so another site
cannot log a browser in under its own account.

Failed logins are limited (``yak.security.login_limiter``): after
``YAK_CONSOLE_LOGIN_MAX_FAILURES`` failures for one user name, or from one client address,
within ``YAK_CONSOLE_LOGIN_WINDOW_S``, the form answers 429 with ``Retry-After`` without asking
the API, until the oldest failure leaves the window. A success forgets the user name's
failures (not the address's). Behind a reverse proxy every browser has the proxy's address:
size the limit for it, or set it to 0 and rely on the per-user count. The login form's body
is bounded (16 KiB, then 413): it is the one POST anyone may send without a session.
"""

from __future__ import annotations

import secrets
import time
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from yak.errors import AuthenticationError, AuthenticationThrottledError, YakError
from yak.security.login_limiter import FailedLoginLimiter, retry_after_header
from yak_console.auth.guard import COOKIE
from yak_console.auth.roles import role_of
from yak_console.auth.sessions import SessionStore
from yak_console.pages.common import Pages

__all__ = ["CHALLENGE", "LOGIN_COOKIE", "login_redirect", "router", "safe_next"]

LOGIN_COOKIE = "yak_console_login"
_LOGIN_BODY_LIMIT = 16 * 1024  # a user name, a password or a key, two tokens: 413 beyond
#: The challenge of a 401 (RFC 9110 requires one): a cookie session, opened by the form at
#: ``/login`` (the scheme of draft-broyer-http-cookie-auth; no HTTP client answers it itself).
CHALLENGE = f'Cookie realm="yak-console", form-action="/login", cookie-name="{COOKIE}"'
_LOGIN_COOKIE_S = 3_600


def safe_next(target: str) -> str:
    """Where to go after login: a path on this console only (no ``//host``, no scheme)."""
    if target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/"


def router(pages: Pages) -> APIRouter:
    # The login form is the one POST anyone may send without a session: bound its body.
    routes = APIRouter(max_body_size=_LOGIN_BODY_LIMIT)
    settings = pages.settings
    sessions = pages.sessions
    assert sessions is not None
    store: SessionStore = sessions
    limiter = FailedLoginLimiter(settings.login_max_failures, settings.login_window_s)

    def secure(request: Request) -> bool:
        if settings.secure_cookies is not None:
            return settings.secure_cookies
        return request.url.scheme == "https"

    def show(request: Request, next_: str, *, error: str = "", status_code: int = 200) -> Response:
        # The same token while its cookie lives: a second login tab must not void the first.
        token = store.signer.unsign(request.cookies.get(LOGIN_COOKIE)) or secrets.token_urlsafe(24)
        page = pages.render(
            request,
            "login.html",
            title="Log in",
            bare=True,
            login_token=token,
            next=safe_next(next_),
            error=error,
            expired=request.query_params.get("expired") == "1",
            status_code=status_code,
        )
        page.set_cookie(
            LOGIN_COOKIE,
            store.signer.sign(token),
            max_age=_LOGIN_COOKIE_S,
            path="/login",
            httponly=True,
            samesite="lax",
            secure=secure(request),
        )
        return page

    def throttled(request: Request, next_: str, seconds: int) -> Response:
        message = f"Too many failed logins: try again in {seconds} s."
        page = show(request, next_, error=message, status_code=429)
        page.headers["Retry-After"] = str(seconds)
        return page

    @routes.get("/login", response_class=HTMLResponse, include_in_schema=False)
    async def login_form(request: Request, next: str = "/") -> Response:
        return show(request, next)

    @routes.post("/login", include_in_schema=False)
    async def login(
        request: Request,
        username: Annotated[str, Form(max_length=249)] = "",
        password: Annotated[str, Form(max_length=1024)] = "",
        api_key: Annotated[str, Form(max_length=200)] = "",
        login_token: Annotated[str, Form(max_length=100)] = "",
        next: Annotated[str, Form(max_length=2000)] = "/",
    ) -> Response:
        expected = store.signer.unsign(request.cookies.get(LOGIN_COOKIE))
        if expected is None or not secrets.compare_digest(expected, login_token):
            message = "The login form expired or came from elsewhere: try again."
            return show(request, next, error=message, status_code=403)
        address = request.client.host if request.client else ""
        keys = [f"ip:{address}"] + ([f"user:{username.strip()}"] if username.strip() else [])
        now = time.monotonic()
        wait = max(limiter.retry_after(key, now) for key in keys)
        if wait > 0:
            return throttled(request, next, retry_after_header(wait))
        if api_key.strip():
            clients = pages.runtime.clients_for(api_key=api_key.strip())
        elif username.strip() and password:
            clients = pages.runtime.clients_for(username=username.strip(), password=password)
        else:
            message = "Enter a username and password, or an API key."
            return show(request, next, error=message, status_code=400)
        try:
            me = await clients.admin.whoami()
        except AuthenticationError:
            await clients.aclose()
            for key in keys:
                limiter.failed(key, time.monotonic())
            message = "Wrong username, password or API key."
            return show(request, next, error=message, status_code=401)
        except AuthenticationThrottledError as exc:
            await clients.aclose()
            seconds = exc.details.get("retry_after_s")
            return throttled(request, next, seconds if isinstance(seconds, int) else 1)
        except YakError as exc:
            await clients.aclose()
            return show(request, next, error=f"The API refused: {exc.message}", status_code=503)
        role = role_of(
            me.principal,
            super_user=me.super_user,
            roles=settings.roles,
            default=settings.default_role,
        )
        if username.strip() and not api_key.strip():
            limiter.succeeded(f"user:{username.strip()}")
        session = await store.open(me.principal, role, clients)
        answer = RedirectResponse(safe_next(next), status_code=303)
        answer.set_cookie(
            COOKIE,
            session.cookie,
            max_age=settings.session_max_s,
            httponly=True,
            samesite="lax",
            secure=secure(request),
        )
        answer.delete_cookie(LOGIN_COOKIE, path="/login")
        return answer

    @routes.post("/logout", include_in_schema=False)
    async def logout(request: Request) -> Response:
        session = pages.session(request)
        if session is not None:
            await store.end(session)
        answer = RedirectResponse("/login", status_code=303)
        answer.delete_cookie(COOKIE)
        return answer

    return routes


def login_redirect(request: Request, *, expired: bool = False) -> Response:
    """Send the browser to the login page, back here afterwards (htmx: ``HX-Redirect``)."""
    if request.headers.get("hx-request"):
        target = "/login" + ("?expired=1" if expired else "")
        return Response(
            status_code=401, headers={"HX-Redirect": target, "WWW-Authenticate": CHALLENGE}
        )
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    query = f"next={quote(here if request.method == 'GET' else '/', safe='')}"
    target = f"/login?{query}" + ("&expired=1" if expired else "")
    return RedirectResponse(target, status_code=303)
