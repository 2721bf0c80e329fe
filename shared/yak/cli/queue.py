"""``yak queue``: share groups (KIP-932 queues over topics) — create, list, describe, alter,
delete.

The ``queue`` sub-app is the command family for share groups; the consuming command
(``yak queue consume``) is added beside these in its own module. Every command here is one
request to the rest-proxy's ``/api/v1/share-groups`` through the SDK's ``AsyncAdmin`` (see
``yak.cli.proxy`` for how the proxy is found and how errors are printed: one line with the
code, exit status 1). A group's settings: ``--dead-letter-topic`` (an existing topic; without
one, records past the delivery limit are archived), ``--max-delivery-attempts`` (1-100),
``--lock-duration-ms`` (1,000-3,600,000) and ``--offset-reset`` (``earliest``/``latest``);
the server checks the bounds.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console
from rich.table import Table

from yak.api.share_groups import ShareGroupDescription, ShareGroupLive
from yak.cli.cluster import DataDirOption
from yak.cli.proxy import ApiKeyOption, UrlOption, admin_call

__all__ = ["app"]

_DATA_DIR = Path(".yak")

app = typer.Typer(no_args_is_help=True, help="Share groups: queues over topics.")

Reset = Literal["earliest", "latest"]
DeadLetterOption = Annotated[
    str | None,
    typer.Option("--dead-letter-topic", help="Where records past the limit go (must exist)."),
]
AttemptsOption = Annotated[
    int | None, typer.Option("--max-delivery-attempts", help="Deliveries per record (1-100).")
]
LockOption = Annotated[
    int | None, typer.Option("--lock-duration-ms", help="How long a member holds a record.")
]
ResetOption = Annotated[
    Reset | None, typer.Option("--offset-reset", help="Where a new share-partition starts.")
]


def _row(group: ShareGroupDescription) -> list[str]:
    return [
        group.name,
        group.dead_letter_topic or "-",
        str(group.max_delivery_attempts),
        str(group.lock_duration_ms),
        group.offset_reset,
        "deleting" if group.deleting else "",
    ]


def _print(groups: list[ShareGroupDescription]) -> None:
    table = Table("group", "dead-letter topic", "max attempts", "lock ms", "offset reset", "")
    for group in groups:
        table.add_row(*_row(group))
    Console().print(table)


@app.command()
def create(
    name: str,
    dead_letter_topic: DeadLetterOption = None,
    max_delivery_attempts: AttemptsOption = None,
    lock_duration_ms: LockOption = None,
    offset_reset: ResetOption = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Create a share group (defaults: 5 attempts, 30 s lock, latest, no dead-letter topic)."""
    created = admin_call(
        url,
        api_key,
        data_dir,
        lambda admin: admin.create_share_group(
            name,
            dead_letter_topic=dead_letter_topic,
            max_delivery_attempts=5 if max_delivery_attempts is None else max_delivery_attempts,
            lock_duration_ms=30_000 if lock_duration_ms is None else lock_duration_ms,
            offset_reset=offset_reset or "latest",
        ),
    )
    _print([created])


@app.command("list")
def list_queues(
    url: UrlOption = None, api_key: ApiKeyOption = None, data_dir: DataDirOption = _DATA_DIR
) -> None:
    """List the share groups and their settings."""
    listing = admin_call(url, api_key, data_dir, lambda admin: admin.list_share_groups())
    _print(listing.share_groups)


def _age(timestamp_ms: int | None, now_ms: int) -> str:
    return "-" if timestamp_ms is None else f"{max(now_ms - timestamp_ms, 0) / 1000:.1f}s"


def _live_tables(live: ShareGroupLive, now_ms: int) -> list[Table]:
    """The live state: totals, one row per share-partition, the counters per topic."""
    t = live.totals
    totals = Table("in flight", "available", "acquired", "acknowledged", "dead-lettered",
                   "dlq pending", "lag", "oldest unacked", title="now")  # fmt: skip
    totals.add_row(*map(str, (t.in_flight, t.available, t.acquired, t.acknowledged,
                              t.dead_lettered, t.dead_letter_pending, t.lag)),
                   _age(t.oldest_unacked_timestamp_ms, now_ms))  # fmt: skip
    parts = Table("topic", "partition", "leader", "start", "scan", "high watermark", "in flight",
                  "available", "acquired", "archived", "lag", "oldest unacked", "deliveries",
                  title="share-partitions")  # fmt: skip
    for p in live.partitions:
        if not p.loaded:
            parts.add_row(p.topic, str(p.partition), str(p.leader_id), "-", "-",
                          str(p.high_watermark), "not loaded", *["-"] * 6)  # fmt: skip
            continue
        counts = " ".join(f"{n}x{c}" for n, c in sorted(p.delivery_counts.items())) or "-"
        figures = (p.start_offset, p.scan_offset, p.high_watermark, p.in_flight, p.available,
                   p.acquired, p.archived, p.lag)  # fmt: skip
        parts.add_row(p.topic, str(p.partition), str(p.leader_id), *map(str, figures),
                      _age(p.oldest_unacked_timestamp_ms, now_ms), counts)  # fmt: skip
    topics = Table("topic", "acquired", "accepted", "released", "rejected", "renewed", "expired",
                   "dead-lettered", title="since the brokers started")  # fmt: skip
    for c in live.topics:
        topics.add_row(c.topic, *map(str, (c.acquired, c.accepted, c.released, c.rejected,
                                           c.renewed, c.expired, c.dead_lettered)))  # fmt: skip
    return [totals, parts, topics]


@app.command()
def describe(
    name: str,
    topic: Annotated[
        list[str] | None,
        typer.Option("--topic", help="Also list these topics' partitions nobody read yet."),
    ] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Show a share group's settings and what its partitions' leaders hold now: records in
    flight, acquired, acknowledged, dead-lettered, lag and the oldest unacked record's age."""
    described = admin_call(
        url, api_key, data_dir, lambda admin: admin.describe_share_group(name, topic or ())
    )
    _print([described])
    if described.live is None:
        return
    console = Console()
    for table in _live_tables(described.live, time.time_ns() // 1_000_000):
        console.print(table)
    for error in described.live.errors:
        console.print(f"broker {error.broker_id} did not answer: {error.error}")


@app.command()
def alter(
    name: str,
    dead_letter_topic: DeadLetterOption = None,
    no_dead_letter_topic: Annotated[
        bool, typer.Option("--no-dead-letter-topic", help="Archive records past the limit.")
    ] = False,
    max_delivery_attempts: AttemptsOption = None,
    lock_duration_ms: LockOption = None,
    offset_reset: ResetOption = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Change the settings given; the others stay."""
    if dead_letter_topic is not None and no_dead_letter_topic:
        raise typer.BadParameter("give --dead-letter-topic or --no-dead-letter-topic, not both")
    changes = (dead_letter_topic, max_delivery_attempts, lock_duration_ms, offset_reset)
    if not no_dead_letter_topic and all(c is None for c in changes):
        raise typer.BadParameter("nothing to change: give at least one setting")
    altered = admin_call(
        url,
        api_key,
        data_dir,
        lambda admin: admin.alter_share_group(
            name,
            dead_letter_topic=dead_letter_topic,
            clear_dead_letter_topic=no_dead_letter_topic,
            max_delivery_attempts=max_delivery_attempts,
            lock_duration_ms=lock_duration_ms,
            offset_reset=offset_reset,
        ),
    )
    _print([altered])


@app.command()
def delete(
    name: str,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Delete a share group; the partitions' leaders drop its delivery state."""
    admin_call(url, api_key, data_dir, lambda admin: admin.delete_share_group(name))
    typer.echo(f"deleted share group {name}")
