"""Trailing slashes tolerated: ``/topics/`` is ``/topics`` (Confluent and Karapace accept both).

A pure ASGI middleware that strips one trailing ``/`` from the path before routing, instead of
FastAPI's 307 redirect, which many HTTP clients do not follow for POST bodies.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["StripTrailingSlash"]


class StripTrailingSlash:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            if len(path) > 1 and path.endswith("/"):
                scope = dict(scope)
                scope["path"] = path.rstrip("/") or "/"
                raw = scope.get("raw_path")
                if isinstance(raw, bytes):
                    scope["raw_path"] = raw.rstrip(b"/") or b"/"
        await self.app(scope, receive, send)
