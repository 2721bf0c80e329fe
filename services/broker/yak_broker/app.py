"""The broker service's app factory.

The broker: stores partition replicas and serves the binary data plane.
"""

from __future__ import annotations

from fastapi import FastAPI

from yak import __version__
from yak.web.health import health_router

__all__ = ["create_app"]


def create_app() -> FastAPI:
    """Build the broker ASGI app."""
    app = FastAPI(title="Yak broker", version=__version__)
    app.include_router(health_router("broker"))
    return app
