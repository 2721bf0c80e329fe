"""The coordinator service's app factory.

The coordinator: the controller: assigns partitions, elects leaders, runs group assignment.
"""

from __future__ import annotations

from fastapi import FastAPI

from yak import __version__
from yak.web.health import health_router

__all__ = ["create_app"]


def create_app() -> FastAPI:
    """Build the coordinator ASGI app."""
    app = FastAPI(title="Yak coordinator", version=__version__)
    app.include_router(health_router("coordinator"))
    return app
