"""Run an ASGI app under uvicorn with the settings every Yak service uses.

uvloop and httptools when installed (they come with ``uvicorn[standard]``), the lifespan on,
no access log by default (it costs a write per request on the data plane), and a short
graceful-shutdown window so that SIGTERM stops a service within a few seconds. With a
``ServerTls`` (``yak.web.tls``: ``YAK_TLS_*`` in the environment) the listener speaks TLS.

Every listener bounds the time a request's headers may take (``yak.web.header_timeout``):
``YAK_REQUEST_HEADER_TIMEOUT_MS`` (default 10,000), after which a slow client gets 408 and the
connection closes.

With a ``direct_route`` (``yak.web.direct``) the requests it takes are answered on the
connection without the app's ASGI stack (the rest-proxy's hottest routes).

With a ``drain`` (``yak.web.drain``) the first SIGTERM/SIGINT runs it while the service still
serves, and only then stops the listener; a second signal stops at once.

The port is bound before the app's lifespan starts, so that nothing the app opens at startup can
take it. Before it listens, the process raises its soft open-files limit to the hard one
(``yak.limits``), so that every service (the ones started by ``yak up`` call ``serve``) can
hold as many sockets and files as the machine allows.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from yak.limits import raise_open_files_limit
from yak.web.direct import DirectRoute, DirectRoutesProtocol, with_direct_routes
from yak.web.drain import Drain, DrainingServer
from yak.web.header_timeout import (
    DEFAULT_HEADER_TIMEOUT_S,
    HeaderTimeoutProtocol,
    with_header_timeout,
)
from yak.web.tls import ServerTls
from yak.web.workers import reuse_port_socket

__all__ = ["HEADER_TIMEOUT_ENV", "header_timeout_s", "serve"]

HEADER_TIMEOUT_ENV = "YAK_REQUEST_HEADER_TIMEOUT_MS"


def header_timeout_s(env: Mapping[str, str] | None = None) -> float:
    """The header timeout from ``YAK_REQUEST_HEADER_TIMEOUT_MS`` (default 10 s)."""
    env = os.environ if env is None else env
    text = env.get(HEADER_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_HEADER_TIMEOUT_S
    milliseconds = int(text)
    if milliseconds < 1:
        raise ValueError(f"{HEADER_TIMEOUT_ENV} must be at least 1, got {text!r}")
    return milliseconds / 1000


def serve(
    app: ASGIApp,
    *,
    host: str,
    port: int,
    log_level: str = "info",
    access_log: bool = False,
    graceful_shutdown_s: float = 5.0,
    tls: ServerTls | None = None,
    header_timeout: float | None = None,
    reuse_port: bool = False,
    drain: Drain | None = None,
    direct_route: DirectRoute | None = None,
) -> None:
    """Serve ``app`` on ``host:port`` (HTTPS with ``tls``) until SIGINT/SIGTERM.

    ``header_timeout`` (seconds) defaults to ``YAK_REQUEST_HEADER_TIMEOUT_MS``; ``reuse_port``
    binds with ``SO_REUSEPORT`` so that several processes share the port
    (``yak.web.workers``). ``drain``: run on the first stop signal before the listener
    closes (``yak.web.drain``). ``direct_route``: the requests the service answers without
    its ASGI stack (``yak.web.direct``).
    """
    raise_open_files_limit()
    protocol = HeaderTimeoutProtocol if direct_route is None else DirectRoutesProtocol
    options: dict[str, Any] = {"loop": "auto", "http": protocol}
    if tls is not None:
        options.update(tls.uvicorn_options())
    timeout_s = header_timeout_s() if header_timeout is None else header_timeout
    options["http"] = with_header_timeout(options["http"], timeout_s)
    if direct_route is not None:
        options["http"] = with_direct_routes(options["http"], direct_route)
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
    server = uvicorn.Server(config) if drain is None else DrainingServer(config, drain)
    # The port is bound before the lifespan runs: a service that opens listeners of its own
    # on "any free port" at startup (the broker's internal listener) could otherwise be given
    # this very port by the kernel and make uvicorn's own bind fail (seen in CI).
    socket = reuse_port_socket(host, port) if reuse_port else config.bind_socket()
    try:
        server.run(sockets=[socket])
    finally:
        socket.close()
