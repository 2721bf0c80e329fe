"""``yak``: the command-line entry point; each subcommand lives in its own module."""

from __future__ import annotations

import typer

from yak import __version__
from yak.cli import brokers, cluster, groups, partitions, queue, schemas, security, topics
from yak.cli.consume import consume
from yak.cli.produce import produce
from yak.cli.ps import ps
from yak.cli.queue_consume import queue_consume
from yak.cli.quotas import quotas
from yak.cli.scheduled import queue_cancel, queue_scheduled
from yak.cli.up import up

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Yak: a Kafka-like message broker with an HTTP-first API.",
)
app.command()(up)
app.command()(ps)
app.add_typer(cluster.app, name="cluster")
app.add_typer(topics.app, name="topics")
app.add_typer(partitions.app, name="partitions")
app.add_typer(brokers.app, name="brokers")
app.add_typer(groups.app, name="groups")
queue.app.command("consume")(queue_consume)
queue.app.command("scheduled")(queue_scheduled)
queue.app.command("cancel")(queue_cancel)
app.add_typer(queue.app, name="queue")
app.add_typer(security.users, name="users")
app.add_typer(security.acls, name="acls")
app.add_typer(quotas, name="quotas")
app.add_typer(schemas.app, name="schemas")
app.command()(produce)
app.command()(consume)


@app.command()
def version() -> None:
    """Print Yak's version."""
    typer.echo(__version__)


def main() -> None:
    app()
