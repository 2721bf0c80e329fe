"""Entry point ``yak-coordinator``: run the coordinator service.

Flags win over the ``YAK_*`` environment (``yak up`` sets ``YAK_ETCD``, ``YAK_CLUSTER_ID``,
``YAK_NODE_ID``, ``YAK_DATA_DIR``), which wins over the defaults of ``CoordinatorSettings``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from yak.gc_tuning import GcTuning
from yak.observability.logs import configure_logging
from yak.security.audit import install_audit_handler
from yak.web.serve import serve
from yak.web.tls import ServerTls
from yak_coordinator.app import create_app
from yak_coordinator.settings import CoordinatorSettings

__all__ = ["main"]

cli = typer.Typer(
    add_completion=False,
    help="Run the Yak coordinator (the controller): partitions, leaders, groups.",
)


@cli.command()
def run(
    host: Annotated[str | None, typer.Option(help="Address to bind [YAK_HOST].")] = None,
    port: Annotated[int | None, typer.Option(help="Port to bind [YAK_PORT].")] = None,
    etcd: Annotated[
        str | None, typer.Option(help="etcd URL, or several, comma-separated [YAK_ETCD].")
    ] = None,
    cluster_id: Annotated[str | None, typer.Option(help="Cluster id [YAK_CLUSTER_ID].")] = None,
    node_id: Annotated[str | None, typer.Option(help="Coordinator id [YAK_NODE_ID].")] = None,
    lease_ttl: Annotated[
        int | None, typer.Option(help="Election lease TTL in seconds [YAK_LEASE_TTL_S].")
    ] = None,
    log_level: Annotated[str, typer.Option(envvar="YAK_LOG_LEVEL")] = "info",
) -> None:
    """Serve the coordinator until SIGINT/SIGTERM (an active controller resigns on the way)."""
    settings = CoordinatorSettings.from_env(
        host=host,
        port=port,
        etcd_url=etcd,
        cluster_id=cluster_id,
        node_id=node_id,
        lease_ttl_s=lease_ttl,
    )
    configure_logging("coordinator", log_level)  # YAK_LOG_FORMAT=text|json
    if settings.security:
        install_audit_handler()
    app = create_app(settings)
    GcTuning.from_env("coordinator").apply(app)  # thresholds, and what start-up built frozen
    serve(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        tls=ServerTls.from_env(),
    )


def main() -> None:
    cli()
