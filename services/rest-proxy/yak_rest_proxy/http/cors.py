"""CORS (the Fetch standard's cross-origin checks), so a web page can call the proxy directly.

Off unless ``YAK_CORS_ORIGINS`` names origins (``CorsPolicy``; ``settings.py`` reads it). A pure
ASGI middleware in the app's front, before the fast lane and the security guard: a preflight
carries no credential, and the fast lane's produce and poll answers need the headers too.

* **Preflight** (``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method``): answered
  here, never routed. An allowed origin asking for an allowed method and headers gets 204 with
  ``Access-Control-Allow-Origin``, ``-Allow-Methods``, ``-Allow-Headers``, ``-Max-Age`` (and
  ``-Allow-Credentials: true`` when credentials are on); anything else gets 403 with no CORS
  header, so the browser blocks the request before it is sent.
* **Actual requests** with an allowed ``Origin`` get ``Access-Control-Allow-Origin`` (the origin
  itself, or ``*`` for a wildcard policy without credentials), ``-Allow-Credentials`` and
  ``-Expose-Headers`` (by default the ``RateLimit-*``, ``Retry-After``, ``X-Request-Id`` and
  ``Idempotent-Replayed`` headers, which a page cannot read otherwise). A disallowed origin
  gets no CORS header: the request is served (CORS is not access control; the guard is), the
  browser keeps the answer from the page.
* ``Vary: Origin`` on every answer to a request with an ``Origin`` unless the policy is ``*``
  without credentials, so a cache never hands one origin's answer to another.
* ``*`` with credentials is refused when the policy is built: the Fetch standard forbids a
  wildcard ``Access-Control-Allow-Origin`` on credentialed requests, and echoing every origin
  instead would hand any web page the user's cookies and Basic credentials.

Requests without ``Origin`` (every non-browser client) pass through untouched: one scan of the
request headers. Stateless; safe for any number of concurrent requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CorsMiddleware", "CorsPolicy", "parse_origin"]


def parse_origin(text: str) -> str:
    """``text`` as a serialized origin (``scheme://host[:port]``, lower case), or ValueError."""
    parts = urlsplit(text.strip())
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
        or parts.username is not None
    ):
        raise ValueError(f"CORS origin {text!r} is not scheme://host[:port]")
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme}://{parts.hostname}{port}"


@dataclass(frozen=True, slots=True)
class CorsPolicy:
    """Who may call the proxy from a browser; ``origins`` empty: CORS off. The defaults are
    the settings' (``settings.CORS_*``)."""

    origins: tuple[str, ...]
    methods: tuple[str, ...]
    headers: tuple[str, ...]
    expose_headers: tuple[str, ...]
    credentials: bool = False
    max_age_s: int = 600

    def __post_init__(self) -> None:
        if "*" in self.origins:
            if len(self.origins) > 1:
                raise ValueError("YAK_CORS_ORIGINS is either * or a list of origins, not both")
            if self.credentials:
                raise ValueError(
                    "YAK_CORS_ORIGINS=* with YAK_CORS_CREDENTIALS=on is refused: the Fetch "
                    "standard forbids a wildcard origin on credentialed requests; list the "
                    "origins allowed to send credentials"
                )
        else:
            for origin in self.origins:
                if parse_origin(origin) != origin:
                    raise ValueError(
                        f"CORS origin {origin!r} must be written {parse_origin(origin)!r}"
                    )
        if self.max_age_s < 0:
            raise ValueError("YAK_CORS_MAX_AGE_S must be >= 0")

    @property
    def enabled(self) -> bool:
        return bool(self.origins)

    @property
    def wildcard(self) -> bool:
        return self.origins == ("*",)

    def allows(self, origin: str) -> bool:
        return self.wildcard or origin in self.origins


def _encoded(values: tuple[str, ...]) -> bytes:
    return ", ".join(values).encode("latin-1")


class CorsMiddleware:
    """See the module docstring."""

    def __init__(self, app: ASGIApp, policy: CorsPolicy) -> None:
        self.app = app
        self.policy = policy
        self._methods = {m.upper() for m in policy.methods}
        self._headers = {h.lower() for h in policy.headers}
        self._any_header = "*" in policy.headers
        vary = not policy.wildcard or policy.credentials
        self._vary = [(b"vary", b"Origin")] if vary else []
        self._common = list(self._vary)
        if policy.credentials:
            self._common.append((b"access-control-allow-credentials", b"true"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        origin = request_method = requested = None
        for name, value in scope["headers"]:
            if name == b"origin":
                origin = value.decode("latin-1")
            elif name == b"access-control-request-method":
                request_method = value.decode("latin-1")
            elif name == b"access-control-request-headers":
                requested = value.decode("latin-1")
        if origin is None:
            await self.app(scope, receive, send)
        elif scope["method"] == "OPTIONS" and request_method is not None:
            await self._preflight(origin, request_method, requested, send)
        else:
            await self.app(scope, receive, self._sender(origin, send))

    def _allow_origin(self, origin: str) -> bytes:
        if self.policy.wildcard and not self.policy.credentials:
            return b"*"
        return origin.encode("latin-1")

    def _sender(self, origin: str, send: Send) -> Send:
        if not self.policy.allows(origin):
            extra = self._vary
        else:
            extra = [
                (b"access-control-allow-origin", self._allow_origin(origin)),
                *self._common,
            ]
            if self.policy.expose_headers:
                extra.append(
                    (b"access-control-expose-headers", _encoded(self.policy.expose_headers))
                )

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start" and extra:
                message = dict(message)
                message["headers"] = [*message.get("headers", ()), *extra]
            await send(message)

        return send_with_cors

    def _refusal(self, origin: str, method: str, requested: list[str]) -> str | None:
        if not self.policy.allows(origin):
            return f"origin {origin} is not allowed (YAK_CORS_ORIGINS)"
        if method.upper() not in self._methods:
            return f"method {method} is not allowed (YAK_CORS_METHODS)"
        refused = [h for h in requested if h not in self._headers]
        if refused and not self._any_header:
            return f"headers {', '.join(refused)} are not allowed (YAK_CORS_HEADERS)"
        return None

    async def _preflight(self, origin: str, method: str, requested: str | None, send: Send) -> None:
        names = [h.strip().lower() for h in (requested or "").split(",") if h.strip()]
        refusal = self._refusal(origin, method, names)
        if refusal is not None:
            body = f"CORS preflight refused: {refusal}".encode()
            headers = [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *self._vary,
            ]
            await send({"type": "http.response.start", "status": 403, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        allowed_headers = ", ".join(names) if self._any_header else ", ".join(self.policy.headers)
        headers = [
            (b"access-control-allow-origin", self._allow_origin(origin)),
            *self._common,
            (b"access-control-allow-methods", _encoded(self.policy.methods)),
            (b"access-control-max-age", str(self.policy.max_age_s).encode()),
        ]
        if allowed_headers:
            headers.append((b"access-control-allow-headers", allowed_headers.encode("latin-1")))
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
