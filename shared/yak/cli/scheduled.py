"""``yak queue scheduled`` and ``yak queue cancel``: a topic's scheduled (delayed) records, and
the parsing of ``yak produce --deliver-after/--deliver-at``.

``yak queue scheduled TOPIC [--partition P] [--limit N]`` lists the pending schedules of every
partition (or of one) in due order per partition, following the proxy's pages
(``GET /api/v1/topics/{t}/partitions/{p}/scheduled``); ``yak queue cancel TOPIC PARTITION
OFFSET`` cancels one (``DELETE .../scheduled/{offset}``). Both go through the SDK's
``AsyncAdmin``; errors print one line with their code and exit 1 (``yak.cli.proxy``):
``DELAYS_NOT_ENABLED``, ``SCHEDULED_RECORD_NOT_FOUND``, ``RECORD_ALREADY_DUE``.

Durations are a whole number and a unit: ``500ms``, ``30s``, ``2m``, ``1h``, ``7d``. Due times
are RFC 3339 with a zone (``2026-12-06T10:00:00Z``, ``...+01:00``) or epoch milliseconds; a time
without a zone names no instant and is refused. docs/queues.md, "Delayed and scheduled
delivery".
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from yak.api.scheduled import ScheduledRecordItem
from yak.cli.cluster import DataDirOption
from yak.cli.proxy import ApiKeyOption, UrlOption, admin_call
from yak.sdk.admin import AsyncAdmin

__all__ = ["parse_deliver_at", "parse_duration_ms", "queue_cancel", "queue_scheduled"]

_DATA_DIR = Path(".yak")
_UNITS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"(\d{1,15})(ms|s|m|h|d)")
_PAGE = 1_000


def parse_duration_ms(text: str, option: str = "--deliver-after") -> int:
    """``30s``, ``500ms``, ``2m`` ... in milliseconds; a usage error otherwise."""
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        raise typer.BadParameter(
            f"expected a number and a unit (ms, s, m, h, d), e.g. 30s or 500ms; got {text!r}",
            param_hint=option,
        )
    return int(found.group(1)) * _UNITS[found.group(2)]


def parse_deliver_at(text: str, option: str = "--deliver-at") -> int:
    """An RFC 3339 time with its zone, or epoch milliseconds, as epoch milliseconds."""
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(
            f"expected e.g. 2026-12-06T10:00:00Z or epoch milliseconds, got {text!r}",
            param_hint=option,
        ) from None
    if when.utcoffset() is None:
        raise typer.BadParameter(
            f"{text!r} has no time zone: add Z or an offset such as +01:00", param_hint=option
        )
    return int(when.timestamp() * 1000)


async def _pending(
    admin: AsyncAdmin, topic: str, partition: int, limit: int
) -> list[ScheduledRecordItem]:
    """Up to ``limit`` pending schedules of one partition, page after page."""
    found: list[ScheduledRecordItem] = []
    page = await admin.list_scheduled(topic, partition, limit=min(limit, _PAGE))
    found += page.records
    while page.next is not None and len(found) < limit:
        page = await admin.list_scheduled(
            topic,
            partition,
            after_ms=page.next.after_ms,
            after_offset=page.next.after_offset,
            limit=min(limit - len(found), _PAGE),
        )
        found += page.records
    return found[:limit]


async def scheduled_records(
    admin: AsyncAdmin, topic: str, partition: int | None, limit: int
) -> list[tuple[int, ScheduledRecordItem]]:
    """(partition, schedule) of one partition or of every partition of ``topic``."""
    if partition is not None:
        partitions = [partition]
    else:
        partitions = list(range((await admin.describe_topic(topic)).partition_count))
    listed: list[tuple[int, ScheduledRecordItem]] = []
    for number in partitions:
        listed += [(number, item) for item in await _pending(admin, topic, number, limit)]
    return listed


def _when(deliver_at_ms: int, now_ms: int) -> tuple[str, str]:
    stamp = datetime.fromtimestamp(deliver_at_ms / 1000, UTC)
    return stamp.isoformat(timespec="milliseconds"), f"{(deliver_at_ms - now_ms) / 1000:,.1f} s"


def queue_scheduled(
    topic: Annotated[str, typer.Argument(help="A topic with delayed.delivery.enable=true.")],
    partition: Annotated[
        int | None, typer.Option("--partition", "-p", help="Only this partition.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="Most records per partition.")] = 1_000,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """List TOPIC's scheduled records not due yet, in due order per partition."""
    listed = admin_call(
        url, api_key, data_dir, lambda admin: scheduled_records(admin, topic, partition, limit)
    )
    now_ms = time.time_ns() // 1_000_000
    table = Table("partition", "offset", "deliver at (UTC)", "due in")
    for number, item in listed:
        table.add_row(str(number), str(item.offset), *_when(item.deliver_at, now_ms))
    Console().print(table)


def queue_cancel(
    topic: Annotated[str, typer.Argument(help="The record's topic.")],
    partition: Annotated[int, typer.Argument(help="The record's partition.")],
    offset: Annotated[int, typer.Argument(help="The record's offset.")],
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = _DATA_DIR,
) -> None:
    """Cancel the schedule of one delayed record: share groups will never get it."""
    done = admin_call(
        url, api_key, data_dir, lambda admin: admin.cancel_scheduled(topic, partition, offset)
    )
    stamp, _ = _when(done.deliver_at, 0)
    typer.echo(f"cancelled {done.topic}-{done.partition}@{done.offset} (was due {stamp})")
