"""``yak groups offsets export|import``: a consumer group's committed offsets as a JSON file.

``export GROUP`` writes (stdout, or ``--out FILE``)::

    {"version": 1, "group": "billing", "exported_at_ms": 1764000000000,
     "offsets": [{"topic": "orders", "partition": 0, "offset": 42}, ...]}

with each partition's committed offset — the next offset to read, Kafka's convention —
for every partition the group has committed (partitions without a commit are left out).
``import GROUP FILE`` sets the committed offsets of GROUP (any group: the file's ``group`` is
informative) to the file's, through the rest-proxy's offset reset (``to: "explicit"``): like
Kafka's ``--reset-offsets --from-file`` it is refused while the group has active members,
offsets beyond a partition's log are moved to its nearest end, and ``--dry-run`` only shows
the changes. Both go through the SDK's ``AsyncAdmin`` (``yak.cli.proxy`` finds the proxy).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from yak.api.groups import GroupDescription
from yak.cli.cluster import DataDirOption
from yak.cli.proxy import ApiKeyOption, UrlOption, admin_call

__all__ = ["app", "offsets_document", "parse_offsets"]

_T = TypeVar("_T")
_DATA_DIR = Path(".yak")

app = typer.Typer(no_args_is_help=True, help="Export and import a group's committed offsets.")


def offsets_document(group: GroupDescription, now_ms: int) -> dict[str, Any]:
    """The export file's content for ``group`` (committed partitions only, sorted)."""
    return {
        "version": 1,
        "group": group.group_id,
        "exported_at_ms": now_ms,
        "offsets": [
            {"topic": p.topic, "partition": p.partition, "offset": p.committed_offset}
            for p in sorted(group.partitions, key=lambda p: (p.topic, p.partition))
            if p.committed_offset is not None
        ],
    }


def parse_offsets(document: object) -> dict[tuple[str, int], int]:
    """(topic, partition) → offset from an export file; ``ValueError`` when malformed."""
    if not isinstance(document, dict) or document.get("version") != 1:
        raise ValueError('an offsets file is a JSON object with "version": 1')
    items = document.get("offsets")
    if not isinstance(items, list):
        raise ValueError('an offsets file needs an "offsets" list')
    out: dict[tuple[str, int], int] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"offsets[{i}] is not an object")
        topic, partition, offset = item.get("topic"), item.get("partition"), item.get("offset")
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"offsets[{i}]: topic must be a non-empty string")
        for name, value in (("partition", partition), ("offset", offset)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"offsets[{i}]: {name} must be an integer >= 0")
        assert isinstance(partition, int)
        assert isinstance(offset, int)
        if (topic, partition) in out:
            raise ValueError(f"offsets[{i}]: {topic}-{partition} is listed twice")
        out[(topic, partition)] = offset
    return out


@app.command("export")
def export_offsets(
    group: str,
    out: Annotated[Path | None, typer.Option("--out", help="Write here instead of stdout.")] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Write a group's committed offsets as JSON."""
    described = admin_call(url, api_key, data_dir, lambda admin: admin.describe_group(group))
    document = offsets_document(described, int(time.time() * 1000))
    text = json.dumps(document, indent=2) + "\n"
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text)
        typer.echo(f"{len(document['offsets'])} offsets of group {group} written to {out}")


@app.command("import")
def import_offsets(
    group: str,
    file: Annotated[Path, typer.Argument(metavar="FILE", help="An export ('-': stdin).")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show the changes.")] = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Set a group's committed offsets from an export (refused while it has members)."""
    try:
        text = sys.stdin.read() if str(file) == "-" else file.read_text()
        offsets = parse_offsets(json.loads(text))
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"{file}: {exc}", param_hint="FILE") from None
    if not offsets:
        raise typer.BadParameter(f"{file} holds no offsets", param_hint="FILE")
    result = admin_call(
        url,
        api_key,
        data_dir,
        lambda admin: admin.reset_offsets(group, "explicit", offsets=offsets, dry_run=dry_run),
    )
    table = Table("partition", "previous", "new", "note")
    for change in result.partitions:
        previous = "-" if change.previous is None else str(change.previous)
        wanted = offsets[(change.topic, change.partition)]
        note = "" if change.new == wanted else f"{wanted} is outside the log"
        table.add_row(f"{change.topic}-{change.partition}", previous, str(change.new), note)
    Console().print(table)
    typer.echo("dry run: nothing changed" if result.dry_run else f"imported offsets of {group}")
