"""``yak topics``: create, list, describe, alter and delete topics (like kafka-topics); dump
a topic's records to a folder and restore them (``yak.cli.topic_dump``).

Every command but dump and restore is one admin request to a coordinator (see
``yak.cli.cluster`` for how it is found and how errors are printed); results are shown as rich
tables. Dump and restore go through the rest-proxy with the SDK (``yak.cli.proxy``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from yak.api.admin import PartitionInfo, TopicDescription
from yak.cli.cluster import AdminApiKeyOption, CoordinatorOption, DataDirOption, call_admin
from yak.cli.proxy import ApiKeyOption, UrlOption, proxy_url, run_or_exit
from yak.cli.secure import cluster_api_key
from yak.cli.topic_dump import dump_topic, read_manifest, restore_topic
from yak.topic_config import MIN_INSYNC_REPLICAS

__all__ = ["app", "parse_configs", "partition_status"]

app = typer.Typer(no_args_is_help=True, help="Create, list, describe, alter and delete topics.")

_DATA_DIR = Path(".yak")
ConfigOption = Annotated[
    list[str] | None,
    typer.Option("--config", "-c", help="A topic config as key=value (repeatable)."),
]


def parse_configs(pairs: list[str] | None) -> dict[str, str]:
    """``["k=v", ...]`` as a mapping; a pair without ``=`` is a usage error."""
    configs: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected key=value, got {pair!r}", param_hint="--config")
        configs[key.strip()] = value
    return configs


def _print_topic(topic: TopicDescription) -> None:
    console = Console()
    console.print(
        f"topic [bold]{topic.name}[/bold]  id {topic.topic_id}  partitions "
        f"{topic.partition_count}  replication factor {topic.replication_factor}"
        + ("  [red](being deleted)[/red]" if topic.deleting else "")
    )
    configs = ", ".join(f"{k}={v}" for k, v in sorted(topic.configs.items()))
    console.print(f"configs: {configs or '(defaults)'}")
    table = Table("partition", "leader", "leader epoch", "replicas", "isr", "status")
    min_insync = _min_insync(topic.configs)
    for p in topic.partitions:
        leader = "none" if p.leader < 0 else str(p.leader)
        table.add_row(
            str(p.partition),
            leader,
            str(p.leader_epoch),
            ",".join(map(str, p.replicas)),
            ",".join(map(str, p.isr)),
            partition_status(p, min_insync),
        )
    console.print(table)


def partition_status(p: PartitionInfo, min_insync: int = 1) -> str:
    """What needs attention in a partition: offline, under-replicated, under min ISR, moving."""
    marks = []
    if p.leader < 0:
        marks.append("offline")
    if len(p.isr) < len(p.replicas) - len(p.adding_replicas):
        marks.append("under-replicated")
    if len(p.isr) < min_insync:
        marks.append(f"under min ISR ({min_insync})")
    if p.adding_replicas or p.removing_replicas:
        adding, removing = (
            ",".join(map(str, p.adding_replicas)),
            ",".join(map(str, p.removing_replicas)),
        )
        marks.append(f"reassigning (+{adding or '-'} -{removing or '-'})")
    return ", ".join(marks)


def _min_insync(configs: dict[str, str]) -> int:
    try:
        return max(int(configs.get(MIN_INSYNC_REPLICAS, "1")), 1)
    except ValueError:
        return 1


@app.command()
def create(
    name: str,
    partitions: Annotated[int, typer.Option(help="Number of partitions.")] = 1,
    replication_factor: Annotated[
        int | None, typer.Option(help="Replicas per partition (default: the cluster's, 1).")
    ] = None,
    config: ConfigOption = None,
    coordinator: CoordinatorOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: AdminApiKeyOption = None,
) -> None:
    """Create a topic."""
    configs = parse_configs(config)
    topic = call_admin(
        coordinator,
        data_dir,
        lambda admin: admin.create_topic(
            name, partitions=partitions, replication_factor=replication_factor, configs=configs
        ),
        api_key=api_key,
    )
    typer.echo(f"created topic {topic.name}")
    _print_topic(topic)


@app.command("list")
def list_topics(
    coordinator: CoordinatorOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: AdminApiKeyOption = None,
) -> None:
    """List the topics."""
    listing = call_admin(coordinator, data_dir, lambda admin: admin.list_topics(), api_key=api_key)
    table = Table("topic", "partitions", "replication factor", "status")
    for topic in listing.topics:
        status = "deleting" if topic.deleting else ""
        table.add_row(topic.name, str(topic.partitions), str(topic.replication_factor), status)
    Console().print(table)


@app.command()
def describe(
    name: str,
    coordinator: CoordinatorOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: AdminApiKeyOption = None,
) -> None:
    """Show a topic's configs and each partition's leader, epoch, replicas and ISR."""
    _print_topic(
        call_admin(coordinator, data_dir, lambda admin: admin.describe_topic(name), api_key=api_key)
    )


@app.command()
def delete(
    name: str,
    coordinator: CoordinatorOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: AdminApiKeyOption = None,
) -> None:
    """Delete a topic and all its data."""
    result = call_admin(
        coordinator, data_dir, lambda admin: admin.delete_topic(name), api_key=api_key
    )
    done = "deleted" if result.deleted else "marked for deletion"
    typer.echo(f"topic {result.name} {done}")


@app.command()
def alter(
    name: str,
    config: ConfigOption = None,
    delete_config: Annotated[
        list[str] | None, typer.Option(help="A config to reset to its default (repeatable).")
    ] = None,
    partitions: Annotated[
        int | None, typer.Option(help="New partition count (can only grow).")
    ] = None,
    coordinator: CoordinatorOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: AdminApiKeyOption = None,
) -> None:
    """Change a topic's configs and/or raise its partition count."""
    configs = parse_configs(config)
    if not configs and not delete_config and partitions is None:
        raise typer.BadParameter("give --config, --delete-config or --partitions")
    topic: TopicDescription | None = None
    if configs or delete_config:
        topic = call_admin(
            coordinator,
            data_dir,
            lambda admin: admin.alter_topic_configs(
                name, set_configs=configs, delete_configs=delete_config or []
            ),
            api_key=api_key,
        )
    if partitions is not None:
        count = partitions
        topic = call_admin(
            coordinator,
            data_dir,
            lambda admin: admin.create_partitions(name, count),
            api_key=api_key,
        )
    assert topic is not None
    typer.echo(f"altered topic {topic.name}")
    _print_topic(topic)


@app.command()
def reassign(
    name: str,
    partition: Annotated[int, typer.Option(help="Partition to move.")],
    replicas: Annotated[
        str | None, typer.Option(help="New replica list, e.g. 1,2,3 (first: preferred leader).")
    ] = None,
    cancel: Annotated[bool, typer.Option(help="Cancel the running move instead.")] = False,
    coordinator: CoordinatorOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: AdminApiKeyOption = None,
) -> None:
    """Move a partition to other brokers; it completes once the new replicas are in sync."""
    if cancel == (replicas is not None):
        raise typer.BadParameter("give either --replicas or --cancel")
    if cancel:
        state = call_admin(
            coordinator,
            data_dir,
            lambda admin: admin.cancel_reassignment(name, partition),
            api_key=api_key,
        )
    else:
        try:
            wanted = [int(r) for r in (replicas or "").split(",")]
        except ValueError:
            message = f"--replicas must be broker ids like 1,2,3: {replicas!r}"
            raise typer.BadParameter(message) from None
        state = call_admin(
            coordinator,
            data_dir,
            lambda admin: admin.reassign_partition(name, partition, wanted),
            api_key=api_key,
        )
    typer.echo(
        f"{name}-{state.partition}: replicas {state.replicas} isr {state.isr} "
        f"adding {state.adding_replicas} removing {state.removing_replicas}"
    )


@app.command()
def dump(
    name: str,
    out: Annotated[Path, typer.Option("--out", help="Folder to write (created; empty).")],
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Write every partition's records (keys, headers, timestamps) and the topic's shape and
    configs to a folder, as JSON lines (format: ``yak.cli.topic_dump``)."""
    target, key = proxy_url(url, data_dir), cluster_api_key(api_key, data_dir)
    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(f"dumping {name}", total=None)
        try:
            manifest = run_or_exit(
                dump_topic(
                    target, name, out, api_key=key, advance=lambda n: progress.advance(task, n)
                )
            )
        except FileExistsError as exc:
            raise typer.BadParameter(str(exc), param_hint="--out") from None
    records = sum(f.records for f in manifest.files)
    typer.echo(f"dumped {records} records of {name} ({manifest.partitions} partitions) to {out}")


@app.command()
def restore(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="A folder of `yak topics dump`.")],
    topic: Annotated[
        str | None, typer.Option("--topic", help="Restore under this name (default: the dump's).")
    ] = None,
    replication_factor: Annotated[
        int | None, typer.Option(min=1, help="Default: the dumped topic's.")
    ] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Create the dumped topic (same partitions and configs) and produce its records back to
    the same partitions in order."""
    try:
        total = sum(f.records for f in read_manifest(folder).files)
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"{folder}: {exc}", param_hint="DIR") from None
    target, key = proxy_url(url, data_dir), cluster_api_key(api_key, data_dir)
    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("restoring", total=total)
        try:
            restored, produced = run_or_exit(
                restore_topic(
                    target,
                    folder,
                    topic=topic,
                    replication_factor=replication_factor,
                    api_key=key,
                    advance=lambda n: progress.advance(task, n),
                )
            )
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="DIR") from None
    typer.echo(f"restored {produced} records into topic {restored}")
