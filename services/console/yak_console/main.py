"""Entry point `yak-console`: run the console service."""

from __future__ import annotations

import typer

from yak.web.serve import serve
from yak_console.app import create_app

__all__ = ["main"]

cli = typer.Typer(
    add_completion=False,
    help="Run the Yak console: the web console.",
)


@cli.command()
def run(
    host: str = typer.Option("127.0.0.1", envvar="YAK_HOST", help="Address to bind."),
    port: int = typer.Option(8080, envvar="YAK_PORT", help="Port to bind."),
    log_level: str = typer.Option("info", envvar="YAK_LOG_LEVEL"),
) -> None:
    """Serve the console until SIGINT/SIGTERM."""
    serve(create_app(), host=host, port=port, log_level=log_level)


def main() -> None:
    cli()
