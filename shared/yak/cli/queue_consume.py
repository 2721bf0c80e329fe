"""``yak queue consume GROUP TOPIC…``: take records from a share group and answer each one.

A member of share group GROUP (``yak queue create``) over TOPICs, through the rest-proxy and
the SDK's ``AsyncShareConsumer``. Each record is printed like ``yak consume`` prints it (the
value; ``--print-offset``/``--print-key``/``--print-headers``, or ``-f`` kcat's placeholders)
and accepted. With ``--reject-failed-cmd CMD``, CMD runs per record (through the shell, the
record's value on its standard input, ``YAK_TOPIC``/``YAK_PARTITION``/``YAK_OFFSET``/
``YAK_DELIVERY_COUNT`` in its environment): exit status 0 accepts the record, any other rejects
it (to the group's dead-letter topic). ``--filter`` takes only records the expression accepts
(docs/filters.md). ``--max-messages N`` stops after N records; without ``--follow`` it stops at
the first acquire that finds nothing. Records held but not answered on exit are released.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated

import typer

from yak.cli.cluster import DataDirOption
from yak.cli.proxy import ApiKeyOption, UrlOption, proxy_url, run_or_exit
from yak.cli.record_format import RecordFormat, default_format
from yak.cli.secure import cluster_api_key
from yak.sdk import AsyncShareConsumer, ConsumerRecord, ShareRecord

__all__ = ["queue_consume"]

_WAIT_MS = 1_000


async def _succeeds(command: str, record: ShareRecord) -> bool:
    """Whether ``command`` exits 0 with the record's value on its standard input."""
    env = {
        **os.environ,
        "YAK_TOPIC": record.topic,
        "YAK_PARTITION": str(record.partition),
        "YAK_OFFSET": str(record.offset),
        "YAK_DELIVERY_COUNT": str(record.delivery_count),
    }
    process = await asyncio.create_subprocess_shell(command, stdin=asyncio.subprocess.PIPE, env=env)
    await process.communicate(record.value or b"")
    return process.returncode == 0


def _plain(record: ShareRecord) -> ConsumerRecord:
    return ConsumerRecord(
        record.topic,
        record.partition,
        record.offset,
        record.timestamp,
        record.key,
        record.value,
        record.headers,
    )


async def _consume(
    consumer: AsyncShareConsumer,
    printer: RecordFormat,
    limit: int | None,
    follow: bool,
    command: str | None,
) -> None:
    handled = 0
    while limit is None or handled < limit:
        records = await consumer.acquire(
            _WAIT_MS, max_records=min(limit - handled, 500) if limit else None
        )
        if not records and not follow:
            return
        for record in records:
            if limit is not None and handled >= limit:
                break  # the rest is released on close
            typer.echo(printer.render(_plain(record)), nl=False)
            if command is None or await _succeeds(command, record):
                await record.ack()
            else:
                await record.reject()
            handled += 1
    for failure in await consumer.flush():
        typer.echo(f"warning: {failure.error.code}: {failure.error.message}", err=True)


def queue_consume(
    group: Annotated[str, typer.Argument(help="Share group to take records from.")],
    topics: Annotated[list[str], typer.Argument(help="Topics to read.")],
    max_messages: Annotated[
        int | None,
        typer.Option("--max-messages", "--max", "-c", min=1, help="Stop after N records."),
    ] = None,
    filter: Annotated[
        str | None, typer.Option("--filter", help="Only records this expression accepts.")
    ] = None,
    reject_failed_cmd: Annotated[
        str | None,
        typer.Option(
            "--reject-failed-cmd",
            help="Run per record (value on stdin): exit 0 accepts it, anything else rejects it.",
        ),
    ] = None,
    follow: Annotated[bool, typer.Option("--follow", help="Wait for new records.")] = False,
    print_offset: Annotated[bool, typer.Option(help="Print each record's offset.")] = False,
    print_key: Annotated[bool, typer.Option(help="Print each record's key.")] = False,
    print_headers: Annotated[bool, typer.Option(help="Print each record's headers.")] = False,
    record_format: Annotated[
        str | None,
        typer.Option("--format", "-f", help="kcat-like format, e.g. '%k=%v (%p@%o)\\n'."),
    ] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = Path(".yak"),
) -> None:
    """Take records of TOPICs from share group GROUP, print and answer each one."""
    try:
        printer = RecordFormat(
            record_format
            if record_format is not None
            else default_format(print_offset, print_key, print_headers)
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--format") from None
    target = proxy_url(url, data_dir)
    key = cluster_api_key(api_key, data_dir)

    async def run() -> None:
        async with AsyncShareConsumer(target, group, topics, filter=filter, api_key=key) as c:
            await _consume(c, printer, max_messages, follow, reject_failed_cmd)

    run_or_exit(run())
