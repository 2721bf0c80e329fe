"""The console service's app factory.

The console: the web console.
"""

from __future__ import annotations

from fastapi import FastAPI

from yak import __version__
from yak.web.health import health_router

__all__ = ["create_app"]


def create_app() -> FastAPI:
    """Build the console ASGI app."""
    app = FastAPI(title="Yak console", version=__version__)
    app.include_router(health_router("console"))
    return app
