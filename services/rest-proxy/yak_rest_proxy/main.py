"""Entry point `yak-rest-proxy`: run the rest-proxy service.

``--host``/``--port`` and ``--log-level`` are flags; every setting also has a ``YAK_*``
environment variable (``yak up`` sets ``YAK_ETCD``, ``YAK_CLUSTER_ID``, ``YAK_NODE_ID``); see
``settings`` for the defaults.
"""

from __future__ import annotations

import gc
from typing import Annotated

import typer

from yak.observability.logs import configure_logging
from yak.security.audit import install_audit_handler
from yak.web.serve import serve
from yak.web.tls import ServerTls
from yak_rest_proxy.app import create_app
from yak_rest_proxy.settings import ProxySettings

__all__ = ["main"]

cli = typer.Typer(
    add_completion=False,
    help="Run the Yak rest-proxy: the public REST API (Confluent v2-compatible and native).",
)


@cli.command()
def run(
    host: Annotated[str, typer.Option(envvar="YAK_HOST", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="YAK_PORT", help="Port to bind.")] = 8082,
    etcd: Annotated[str, typer.Option(envvar="YAK_ETCD", help="etcd URL.")] = (
        "http://127.0.0.1:2379"
    ),
    cluster_id: Annotated[str, typer.Option(envvar="YAK_CLUSTER_ID", help="Cluster id.")] = "local",
    log_level: Annotated[str, typer.Option(envvar="YAK_LOG_LEVEL")] = "info",
) -> None:
    """Serve the rest-proxy until SIGINT/SIGTERM."""
    configure_logging("rest-proxy", log_level)  # YAK_LOG_FORMAT=text|json
    settings = ProxySettings.from_env(host=host, port=port, etcd_url=etcd, cluster_id=cluster_id)
    app = create_app(settings)
    if settings.security:
        install_audit_handler()
    # Every request allocates thousands of short-lived objects (one per record and field):
    # with CPython's default threshold (700) the young-generation collector took a fifth of
    # the proxy's CPU under load. Collect less often, and never scan what startup loaded.
    gc.set_threshold(50_000, 50, 100)
    gc.freeze()
    serve(app, host=host, port=port, log_level=log_level, tls=ServerTls.from_env())


def main() -> None:
    cli()
