"""``yak groups``: list, describe, reset the offsets of and delete consumer groups
(like kafka-consumer-groups).

Every command is one request to the rest-proxy's group admin API through the SDK's
``AsyncAdmin`` (see ``yak.cli.proxy`` for how the proxy is found and errors are printed);
results are rich tables. ``reset-offsets`` moves committed offsets to the earliest or latest
offset, a timestamp or an offset, for every topic the group has offsets for or only
``--topic``; it is refused while the group has members unless ``--force``, and ``--dry-run``
shows what would change without changing it. ``offsets export`` / ``offsets import`` save a
group's committed offsets to a JSON file and set them from one (``yak.cli.group_offsets``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from yak.api.groups import GroupDescription, TopicPartitionList
from yak.cli import group_offsets
from yak.cli.cluster import DataDirOption
from yak.cli.proxy import ApiKeyOption, UrlOption, admin_call
from yak.sdk import ResetTarget

__all__ = ["app"]

_T = TypeVar("_T")
_DATA_DIR = Path(".yak")

app = typer.Typer(no_args_is_help=True, help="List, describe and reset consumer groups.")
app.add_typer(group_offsets.app, name="offsets")


def _partitions(lists: list[TopicPartitionList]) -> str:
    return " ".join(f"{tp.topic}:{','.join(map(str, tp.partitions))}" for tp in lists) or "-"


def _print_group(group: GroupDescription) -> None:
    console = Console()
    console.print(
        f"group [bold]{group.group_id}[/bold]  state {group.state}  epoch {group.group_epoch}  "
        f"assignor {group.assignor or '-'}  total lag {group.total_lag}"
    )
    members = Table("member", "epoch", "subscription", "owned", "target", title="members")
    for member in group.members:
        members.add_row(
            member.member_id,
            str(member.member_epoch),
            member.topic_pattern or ",".join(member.subscription),
            _partitions(member.owned),
            _partitions(member.target),
        )
    console.print(members)
    lags = Table("partition", "committed", "end offset", "lag", "owner", title="offsets")
    for p in group.partitions:
        committed = "-" if p.committed_offset is None else str(p.committed_offset)
        lags.add_row(
            f"{p.topic}-{p.partition}", committed, str(p.end_offset), str(p.lag), p.owner or "-"
        )
    console.print(lags)


@app.command("list")
def list_groups(
    url: UrlOption = None, api_key: ApiKeyOption = None, data_dir: DataDirOption = _DATA_DIR
) -> None:
    """List the consumer groups with their state and member count."""
    listing = admin_call(url, api_key, data_dir, lambda admin: admin.list_groups())
    table = Table("group", "state", "members")
    for group in listing.groups:
        table.add_row(group.group_id, group.state, str(group.members))
    Console().print(table)


@app.command()
def describe(
    group: str,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Show a group's members and, per partition, committed offset, end offset, lag, owner."""
    _print_group(admin_call(url, api_key, data_dir, lambda admin: admin.describe_group(group)))


@app.command("reset-offsets")
def reset_offsets(
    group: str,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="The first offsets.")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="The end offsets.")] = False,
    to_timestamp: Annotated[
        int | None, typer.Option("--to-timestamp", min=0, help="First offsets at or after (ms).")
    ] = None,
    to_offset: Annotated[
        int | None, typer.Option("--to-offset", min=0, help="This offset (within the log).")
    ] = None,
    topic: Annotated[
        list[str] | None,
        typer.Option("--topic", help="Only this topic (repeatable; default: the group's)."),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show the changes.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Even while the group has members.")
    ] = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Move a group's committed offsets (refused while it has members, unless --force)."""
    options: list[tuple[ResetTarget, bool]] = [
        ("earliest", to_earliest),
        ("latest", to_latest),
        ("timestamp", to_timestamp is not None),
        ("offset", to_offset is not None),
    ]
    chosen = [target for target, given in options if given]
    if len(chosen) != 1:
        raise typer.BadParameter(
            "give one of --to-earliest, --to-latest, --to-timestamp, --to-offset"
        )
    result = admin_call(
        url,
        api_key,
        data_dir,
        lambda admin: admin.reset_offsets(
            group,
            chosen[0],
            timestamp=to_timestamp,
            offset=to_offset,
            topics=topic,
            force=force,
            dry_run=dry_run,
        ),
    )
    table = Table("partition", "previous", "new")
    for change in result.partitions:
        previous = "-" if change.previous is None else str(change.previous)
        table.add_row(f"{change.topic}-{change.partition}", previous, str(change.new))
    Console().print(table)
    typer.echo("dry run: nothing changed" if result.dry_run else f"reset group {group}")


@app.command()
def delete(
    group: str,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Delete an empty group and its committed offsets."""
    admin_call(url, api_key, data_dir, lambda admin: admin.delete_group(group))
    typer.echo(f"deleted group {group}")
