"""Run an ASGI app under uvicorn with the settings every Yak service uses.

uvloop and httptools when installed (they come with ``uvicorn[standard]``), the lifespan on,
no access log by default (it costs a write per request on the data plane), and a short
graceful-shutdown window so that SIGTERM stops a service within a few seconds.
"""

from __future__ import annotations

import uvicorn
from starlette.types import ASGIApp

__all__ = ["serve"]


def serve(
    app: ASGIApp,
    *,
    host: str,
    port: int,
    log_level: str = "info",
    access_log: bool = False,
    graceful_shutdown_s: float = 5.0,
) -> None:
    """Serve ``app`` on ``host:port`` until SIGINT/SIGTERM."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="auto",
        http="auto",
        lifespan="on",
        log_level=log_level,
        access_log=access_log,
        timeout_graceful_shutdown=int(graceful_shutdown_s),
    )
    uvicorn.Server(config).run()
