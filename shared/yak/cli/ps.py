"""``yak ps``: the processes of a ``yak up`` cluster, from its ``cluster.json``.

One row per process (etcd first): pid, state (``running``, ``starting``, ``backoff``,
``gave-up``, ``exited``, ``stopped``), how often ``yak up`` restarted it, how its last process
ended, and its URL. ``yak up`` rewrites the file after every start, crash and restart
(``yak.cli.up_status``); when its own pid is gone the table is from its last run, and ``yak ps``
says so. Reads only the file: it works while the cluster is unreachable.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from yak.cli.cluster import DataDirOption

__all__ = ["ps"]


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _row(entry: dict[str, Any]) -> tuple[str, ...]:
    return (
        str(entry.get("name", "?")),
        str(entry.get("pid", "")),
        str(entry.get("state", "?")),
        str(entry.get("restarts", 0)),
        str(entry.get("last_exit") or "-"),
        str(entry.get("url") or ""),
    )


def ps(data_dir: DataDirOption = Path(".yak")) -> None:
    """List the processes of the `yak up` cluster in --data-dir: state and restarts."""
    path = data_dir / "cluster.json"
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        typer.echo(f"error: no readable {path} (has `yak up` run here?): {exc}", err=True)
        raise typer.Exit(1) from None
    supervisor = document.get("supervisor") or {}
    entries = document.get("etcd_members") or ([document["etcd"]] if document.get("etcd") else [])
    entries += document.get("processes", [])
    table = Table("process", "pid", "state", "restarts", "last exit", "url")
    for entry in entries:
        table.add_row(*_row(entry))
    console = Console()
    console.print(f"cluster [bold]{document.get('cluster_id', '?')}[/bold]")
    console.print(table)
    if not supervisor.get("running", True) or not _alive(supervisor.get("pid")):
        console.print(
            f"yak up (pid {supervisor.get('pid', '?')}) is not running; "
            f"this is its last run, as of {supervisor.get('updated_at', '?')}"
        )
