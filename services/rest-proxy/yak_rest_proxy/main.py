"""Entry point `yak-rest-proxy`: run the rest-proxy service."""

from __future__ import annotations

import typer

from yak.web.serve import serve
from yak_rest_proxy.app import create_app

__all__ = ["main"]

cli = typer.Typer(
    add_completion=False,
    help="Run the Yak rest-proxy: the public REST API (Confluent v2-compatible and native).",
)


@cli.command()
def run(
    host: str = typer.Option("127.0.0.1", envvar="YAK_HOST", help="Address to bind."),
    port: int = typer.Option(8082, envvar="YAK_PORT", help="Port to bind."),
    log_level: str = typer.Option("info", envvar="YAK_LOG_LEVEL"),
) -> None:
    """Serve the rest-proxy until SIGINT/SIGTERM."""
    serve(create_app(), host=host, port=port, log_level=log_level)


def main() -> None:
    cli()
