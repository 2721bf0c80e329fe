"""Entry point `yak-rest-proxy`: run the rest-proxy service.

``--host``/``--port``, ``--log-level`` and ``--workers`` (processes sharing the port with
``SO_REUSEPORT``, ``yak.web.workers``) are flags; every setting also has a ``YAK_*``
environment variable (``yak up`` sets ``YAK_ETCD``, ``YAK_CLUSTER_ID``, ``YAK_NODE_ID``); see
``settings`` for the defaults.
"""

from __future__ import annotations

from typing import Annotated

import typer

from yak.gc_tuning import GcTuning
from yak.observability.logs import configure_logging
from yak.security.audit import install_audit_handler
from yak.web.serve import serve
from yak.web.tls import ServerTls
from yak.web.workers import run_workers
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
    etcd: Annotated[
        str, typer.Option(envvar="YAK_ETCD", help="etcd URL, or several, comma-separated.")
    ] = "http://127.0.0.1:2379",
    cluster_id: Annotated[str, typer.Option(envvar="YAK_CLUSTER_ID", help="Cluster id.")] = "local",
    log_level: Annotated[str, typer.Option(envvar="YAK_LOG_LEVEL")] = "info",
    workers: Annotated[
        int,
        typer.Option(
            envvar="YAK_WORKERS",
            min=1,
            help="Processes serving the port together (SO_REUSEPORT); the proxy is stateless.",
        ),
    ] = 1,
) -> None:
    """Serve the rest-proxy until SIGINT/SIGTERM."""
    configure_logging("rest-proxy", log_level)  # YAK_LOG_FORMAT=text|json
    settings = ProxySettings.from_env(host=host, port=port, etcd_url=etcd, cluster_id=cluster_id)
    if workers == 1:
        _serve(settings, log_level, reuse_port=False)
        return
    raise typer.Exit(run_workers(workers, lambda _index: _serve(settings, log_level)))


def _serve(settings: ProxySettings, log_level: str, *, reuse_port: bool = True) -> None:
    app = create_app(settings)
    if settings.security:
        install_audit_handler()
    # Every request allocates thousands of short-lived objects (one per record and field):
    # with CPython's default threshold (700) the young-generation collector took a fifth of
    # the proxy's CPU under load. Collect less often, and never walk what start-up built.
    GcTuning.from_env("rest-proxy").apply(app)
    serve(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        tls=ServerTls.from_env(),
        reuse_port=reuse_port,
        direct_route=app.direct_route,
    )


def main() -> None:
    cli()
