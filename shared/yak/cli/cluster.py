"""``yak cluster``: the cluster overview, and how every admin command finds a coordinator.

``yak cluster status`` lists every broker the cluster knows with its status (``up``,
``shutting down``, ``down``, plus ``decommissioning``), its Kafka listener (``host:port``,
``-`` when it has none open) and when it was last seen: ``now`` for a
registered broker, for one that left the moment its registration vanished, as ``… ago`` and in
UTC (``broker_table``, also used by ``yak brokers list``).

A command talks to the coordinator given by ``--coordinator URL`` (or ``YAK_COORDINATOR``), or
else to the coordinators listed in ``<data-dir>/cluster.json`` written by ``yak up`` (default
``.yak/cluster.json``), trying them in order until one answers; any coordinator forwards admin
requests to the active controller. Failures print one line ``error: CODE: message`` on stderr
and exit with status 1 — no traceback.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from collections.abc import Awaitable, Callable, Generator
from pathlib import Path
from typing import Annotated, TypeVar

import httpx
import typer
from rich.console import Console
from rich.table import Table

from yak.api.admin import BrokerInfo, BrokerStatus, ClusterInfo, PartitionHealthList
from yak.cli.secure import apply_cluster_security, cluster_api_key
from yak.clients.admin import AdminClient
from yak.errors import NetworkError, YakError

__all__ = [
    "AdminApiKeyOption",
    "CoordinatorOption",
    "DataDirOption",
    "app",
    "broker_status",
    "broker_table",
    "call_admin",
    "coordinator_urls",
    "last_seen",
]

_T = TypeVar("_T")

CoordinatorOption = Annotated[
    str | None,
    typer.Option(
        "--coordinator",
        envvar="YAK_COORDINATOR",
        help="Coordinator URL (default: from <data-dir>/cluster.json of `yak up`).",
    ),
]
AdminApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        envvar="YAK_API_KEY",
        help="API key for a coordinator with security on (docs/security.md).",
    ),
]
DataDirOption = Annotated[
    Path, typer.Option("--data-dir", help="Data folder of `yak up` holding cluster.json.")
]

app = typer.Typer(no_args_is_help=True, help="Cluster overview.")


def coordinator_urls(coordinator: str | None, data_dir: Path) -> list[str]:
    """The coordinator URLs to try, in order; a secure ``yak up`` cluster's CA and secret
    become this process's defaults (``yak.cli.secure``)."""
    apply_cluster_security(data_dir)
    if coordinator:
        return [coordinator]
    path = data_dir / "cluster.json"
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise NetworkError(
            f"no --coordinator given and no readable cluster file at {path} "
            f"(is `yak up` running?): {exc.__class__.__name__}"
        ) from exc
    urls = [
        str(p["url"])
        for p in document.get("processes", [])
        if str(p.get("name", "")).startswith("coordinator")
    ]
    if not urls:
        raise NetworkError(f"{path} lists no coordinator")
    return urls


class _Bearer(httpx.Auth):
    def __init__(self, api_key: str) -> None:
        self._header = f"Bearer {api_key}"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["authorization"] = self._header
        yield request


async def _first_answer(
    urls: list[str], call: Callable[[AdminClient], Awaitable[_T]], api_key: str | None
) -> _T:
    error: NetworkError | None = None
    auth = _Bearer(api_key) if api_key else None
    for url in urls:
        async with AdminClient(url, auth=auth) as admin:
            try:
                return await call(admin)
            except NetworkError as exc:
                error = exc
    assert error is not None
    raise error


def call_admin(
    coordinator: str | None,
    data_dir: Path,
    call: Callable[[AdminClient], Awaitable[_T]],
    *,
    api_key: str | None = None,
) -> _T:
    """Run ``call`` against the first reachable coordinator; exit(1) with one line on error.

    ``api_key`` (else a secure ``yak up`` cluster's admin key) goes as a bearer token: a
    coordinator with ``YAK_SECURITY=on`` authorizes its user with ACLs."""
    try:
        urls = coordinator_urls(coordinator, data_dir)
        key = cluster_api_key(api_key, data_dir)
        return asyncio.run(_first_answer(urls, call, key))
    except YakError as exc:
        typer.echo(f"error: {exc.code}: {exc.message}", err=True)
        raise typer.Exit(1) from None


def broker_status(broker: BrokerInfo) -> str:
    """``up``, ``shutting down`` or ``down``, and ``decommissioning`` when it is drained."""
    status = {
        BrokerStatus.UP: "up",
        BrokerStatus.SHUTTING_DOWN: "shutting down",
        BrokerStatus.DOWN: "down",
    }[broker.status]
    return f"{status}, decommissioning" if broker.decommissioning else status


def _age(elapsed_ms: int) -> str:
    seconds = max(0, elapsed_ms) // 1000
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h {minutes}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


def last_seen(broker: BrokerInfo, now_ms: int) -> str:
    """``now`` for a registered broker; ``<age> ago (<UTC time>)`` for one that left
    (``not recorded yet`` until the controller has recorded when)."""
    if broker.status is not BrokerStatus.DOWN:
        return "now"
    if broker.last_seen_ms is None:
        return "not recorded yet"
    moment = dt.datetime.fromtimestamp(broker.last_seen_ms / 1000, tz=dt.UTC)
    stamp = moment.isoformat(timespec="seconds").replace("+00:00", "Z")
    return f"{_age(now_ms - broker.last_seen_ms)} ago ({stamp})"


def broker_table(brokers: list[BrokerInfo], now_ms: int | None = None) -> Table:
    """Every broker with its address, rack, status and when it was last seen."""
    now = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    up = sum(1 for b in brokers if b.status is not BrokerStatus.DOWN)
    table = Table(
        "broker",
        "host",
        "port",
        "rack",
        "kafka",
        "status",
        "last seen",
        title=f"{len(brokers)} broker{'' if len(brokers) == 1 else 's'}, {up} up",
    )
    for broker in brokers:
        table.add_row(
            str(broker.broker_id),
            broker.host,
            str(broker.port),
            broker.rack or "-",
            broker.kafka or "-",
            broker_status(broker),
            last_seen(broker, now),
        )
    return table


def _print_cluster(info: ClusterInfo, unhealthy: PartitionHealthList) -> None:
    console = Console()
    controller = info.controller
    who = "none elected" if controller is None else f"{controller.coordinator_id} "
    if controller is not None:
        who += f"at {controller.url} (epoch {controller.epoch})"
    console.print(f"cluster [bold]{info.cluster_id}[/bold]  controller: {who}")
    console.print(
        f"topics: {info.topic_count}  partitions: {info.partition_count}  "
        f"offline: {info.offline_partition_count}  "
        f"under-replicated: {info.under_replicated_partition_count}  "
        f"under min ISR: {info.under_min_isr_partition_count}"
    )
    console.print(broker_table(info.brokers))
    if unhealthy.partitions:
        table = Table("partition", "leader", "replicas", "isr", "problem", title="needs attention")
        for p in unhealthy.partitions:
            problems = [
                name
                for name, flag in (
                    ("offline", p.offline),
                    ("under-replicated", p.under_replicated),
                    (f"under min ISR ({p.min_insync_replicas})", p.under_min_isr),
                )
                if flag
            ]
            table.add_row(
                f"{p.topic}-{p.partition}",
                str(p.leader) if p.leader >= 0 else "none",
                ",".join(map(str, p.replicas)),
                ",".join(map(str, p.isr)),
                ", ".join(problems),
            )
        console.print(table)


@app.command()
def status(
    coordinator: CoordinatorOption = None,
    data_dir: DataDirOption = Path(".yak"),
    api_key: AdminApiKeyOption = None,
) -> None:
    """Show the controller, every broker (up or down, and when a down one was last seen), the
    partition counts and the partitions that are offline, under-replicated or under their
    min ISR."""

    async def both(admin: AdminClient) -> tuple[ClusterInfo, PartitionHealthList]:
        return await admin.cluster(), await admin.partitions("unhealthy")

    _print_cluster(*call_admin(coordinator, data_dir, both, api_key=api_key))
