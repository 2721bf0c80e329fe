"""Entry point ``yak-schema-registry``: run the schema registry.

Flags win over the ``YAK_*`` environment (``YAK_HOST``, ``YAK_PORT``, ``YAK_ETCD``,
``YAK_CLUSTER_ID``), which wins over the defaults of ``RegistrySettings``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from yak.observability.logs import configure_logging
from yak.web.serve import serve
from yak.web.tls import ServerTls
from yak_schema_registry.app import create_app
from yak_schema_registry.settings import RegistrySettings

__all__ = ["main"]

cli = typer.Typer(
    add_completion=False,
    help="Run the Yak schema registry (Confluent's Schema Registry API, schemas in etcd).",
)


@cli.command()
def run(
    host: Annotated[str | None, typer.Option(help="Address to bind [YAK_HOST].")] = None,
    port: Annotated[int | None, typer.Option(help="Port to bind [YAK_PORT].")] = None,
    etcd: Annotated[
        str | None, typer.Option(help="etcd URL, or several, comma-separated [YAK_ETCD].")
    ] = None,
    cluster_id: Annotated[str | None, typer.Option(help="Cluster id [YAK_CLUSTER_ID].")] = None,
    log_level: Annotated[str, typer.Option(envvar="YAK_LOG_LEVEL")] = "info",
) -> None:
    """Serve the registry until SIGINT/SIGTERM."""
    settings = RegistrySettings.from_env(host=host, port=port, etcd_url=etcd, cluster_id=cluster_id)
    configure_logging("schema-registry", log_level)  # YAK_LOG_FORMAT=text|json
    serve(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        tls=ServerTls.from_env(),
    )


def main() -> None:
    cli()
