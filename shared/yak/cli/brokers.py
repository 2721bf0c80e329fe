"""``yak brokers``: list brokers; decommission (drain), recommission and forget them.

``list`` shows every broker the cluster knows, up or down, and when a down one was last seen
(``yak.cli.cluster.broker_table``).

``decommission ID`` marks the broker draining: the controller moves its leaderships to other
in-sync replicas and reassigns its replicas onto the other brokers, respecting replication
factors and racks (``docs/operations.md``). ``--wait`` follows the drain with a progress bar
until nothing is left on the broker; ``decommission --status`` shows every drain.
``recommission ID`` stops draining (replicas already moved stay where they are).
``forget ID`` deletes the record of a broker that is gone for good, so it is no longer listed
(Kafka's ``kafka-cluster.sh unregister``): refused while it runs (``BROKER_STILL_REGISTERED``)
or while partitions list it as a replica (``BROKER_HAS_REPLICAS``: decommission it first).

Commands talk to a coordinator (``yak.cli.cluster``).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from yak.api.admin import DecommissionStatus
from yak.cli.cluster import (
    AdminApiKeyOption,
    CoordinatorOption,
    DataDirOption,
    broker_table,
    call_admin,
)
from yak.clients.admin import AdminClient

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, help="List, decommission, recommission and forget brokers.")

_DATA_DIR = Path(".yak")
_WAIT_POLL_S = 1.0


def _print_drains(drains: list[DecommissionStatus]) -> None:
    table = Table(
        "broker", "alive", "replicas left", "leads", "moving", "status", title="decommissions"
    )
    for d in drains:
        state = "done: safe to stop" if d.done else "draining"
        if not d.decommissioning:
            state = "recommissioned"
        table.add_row(
            str(d.broker_id),
            "yes" if d.alive else "no",
            str(d.replicas),
            str(d.leaders),
            str(d.moving),
            state,
        )
    Console().print(table)
    for d in drains:
        for blocked in d.blocked:
            typer.echo(f"broker {d.broker_id}: blocked {blocked}")
    if not drains:
        typer.echo("no broker is being decommissioned")


async def _wait_drained(admin: AdminClient, broker_id: int, timeout_s: float) -> DecommissionStatus:
    deadline = time.monotonic() + timeout_s
    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(f"draining broker {broker_id}", total=None)
        total: int | None = None
        while True:
            drains = {d.broker_id: d for d in (await admin.decommissions()).brokers}
            status = drains.get(broker_id)
            if status is None:
                typer.echo(f"broker {broker_id} was recommissioned meanwhile", err=True)
                raise typer.Exit(1)
            total = max(total or 0, status.replicas)
            progress.update(task, total=total, completed=total - status.replicas)
            if status.done or time.monotonic() > deadline:
                return status
            await asyncio.sleep(_WAIT_POLL_S)  # the controller's progress: polled


@app.command("list")
def list_brokers(
    coordinator: CoordinatorOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: AdminApiKeyOption = None,
) -> None:
    """List every broker the cluster knows: up, shutting down or down (and when it was last
    seen), and whether it is being decommissioned."""
    info = call_admin(coordinator, data_dir, lambda admin: admin.cluster(), api_key=api_key)
    Console().print(broker_table(info.brokers))


@app.command()
def decommission(
    broker_id: Annotated[int | None, typer.Argument(metavar="ID", min=0)] = None,
    status: Annotated[bool, typer.Option("--status", help="Show every drain's progress.")] = False,
    wait: Annotated[bool, typer.Option("--wait", help="Wait until the broker is drained.")] = False,
    timeout_s: Annotated[float, typer.Option("--timeout", help="--wait limit (s).")] = 1800.0,
    coordinator: CoordinatorOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: AdminApiKeyOption = None,
) -> None:
    """Drain a broker: leadership and replicas move to the other brokers."""
    if status == (broker_id is not None):
        raise typer.BadParameter("give a broker ID, or --status")
    if status:
        listing = call_admin(
            coordinator, data_dir, lambda admin: admin.decommissions(), api_key=api_key
        )
        _print_drains(listing.brokers)
        return
    assert broker_id is not None
    target = broker_id

    async def start(admin: AdminClient) -> DecommissionStatus:
        started = await admin.decommission_broker(target)
        return await _wait_drained(admin, target, timeout_s) if wait else started

    result = call_admin(coordinator, data_dir, start, api_key=api_key)
    _print_drains([result])
    if wait and not result.done:
        typer.echo(f"broker {target} is not drained after {timeout_s:g} s", err=True)
        raise typer.Exit(1)


@app.command()
def recommission(
    broker_id: Annotated[int, typer.Argument(metavar="ID", min=0)],
    coordinator: CoordinatorOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: AdminApiKeyOption = None,
) -> None:
    """Stop draining a broker; it takes new replicas and leaderships again."""
    result = call_admin(
        coordinator, data_dir, lambda admin: admin.recommission_broker(broker_id), api_key=api_key
    )
    _print_drains([result])


@app.command()
def forget(
    broker_id: Annotated[int, typer.Argument(metavar="ID", min=0)],
    coordinator: CoordinatorOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: AdminApiKeyOption = None,
) -> None:
    """Forget a broker that is gone for good: it is no longer listed. Refused while it runs
    or while partitions list it as a replica (decommission it first)."""
    result = call_admin(
        coordinator, data_dir, lambda admin: admin.forget_broker(broker_id), api_key=api_key
    )
    typer.echo(f"broker {result.broker_id} forgotten")
