"""Entry point `yak-console`: run the web console.

``--host``/``--port``/``--api-url`` are flags; every setting also has a ``YAK_*`` environment
variable (see ``settings``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from yak.observability.logs import configure_logging
from yak.web.serve import serve
from yak.web.tls import ServerTls
from yak_console.app import create_app
from yak_console.settings import ConsoleSettings

__all__ = ["main"]

cli = typer.Typer(
    add_completion=False,
    help="Run the Yak console: topics, brokers, consumer groups and a message browser.",
)


@cli.command()
def run(
    host: Annotated[str, typer.Option(envvar="YAK_HOST", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="YAK_PORT", help="Port to bind.")] = 8080,
    api_url: Annotated[
        str, typer.Option(envvar="YAK_API_URL", help="A rest-proxy's URL (the public API).")
    ] = "http://127.0.0.1:8082",
    read_only: Annotated[
        bool, typer.Option(envvar="YAK_CONSOLE_READ_ONLY", help="Hide and refuse every change.")
    ] = False,
    log_level: Annotated[str, typer.Option(envvar="YAK_LOG_LEVEL")] = "info",
) -> None:
    """Serve the console until SIGINT/SIGTERM."""
    configure_logging("console", log_level)  # YAK_LOG_FORMAT=text|json
    settings = ConsoleSettings.from_env(
        host=host, port=port, api_url=api_url.rstrip("/"), read_only=read_only
    )
    serve(create_app(settings), host=host, port=port, log_level=log_level, tls=ServerTls.from_env())


def main() -> None:
    cli()
