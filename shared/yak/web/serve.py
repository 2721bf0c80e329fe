"""Run an ASGI app under uvicorn with the settings every Yak service uses.

uvloop and httptools when installed (they come with ``uvicorn[standard]``), the lifespan on,
no access log by default (it costs a write per request on the data plane), and a short
graceful-shutdown window so that SIGTERM stops a service within a few seconds. With a
``ServerTls`` (``yak.web.tls``: ``YAK_TLS_*`` in the environment) the listener speaks TLS.
"""

from __future__ import annotations

from typing import Any

import uvicorn
from starlette.types import ASGIApp

from yak.web.tls import ServerTls

__all__ = ["serve"]


def serve(
    app: ASGIApp,
    *,
    host: str,
    port: int,
    log_level: str = "info",
    access_log: bool = False,
    graceful_shutdown_s: float = 5.0,
    tls: ServerTls | None = None,
) -> None:
    """Serve ``app`` on ``host:port`` (HTTPS with ``tls``) until SIGINT/SIGTERM."""
    options: dict[str, Any] = {"loop": "auto", "http": "auto"}
    if tls is not None:
        options.update(tls.uvicorn_options())
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        log_level=log_level,
        access_log=access_log,
        timeout_graceful_shutdown=int(graceful_shutdown_s),
        **options,
    )
    uvicorn.Server(config).run()
