"""The rest-proxy service's app factory.

The rest-proxy: the public REST API (Confluent v2-compatible and native).
"""

from __future__ import annotations

from fastapi import FastAPI

from yak import __version__
from yak.web.health import health_router

__all__ = ["create_app"]


def create_app() -> FastAPI:
    """Build the rest-proxy ASGI app."""
    app = FastAPI(title="Yak rest-proxy", version=__version__)
    app.include_router(health_router("rest-proxy"))
    return app
