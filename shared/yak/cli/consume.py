"""``yak consume TOPIC``: print records (like kafka-console-consumer and kcat).

Two ways to read, both through the rest-proxy (``yak.cli.proxy``) and the SDK:

* **stateless** (no ``--group``): every partition of the topic, or only ``--partition``, from
  ``--offset`` (``earliest`` — the default, also ``--from-beginning`` — ``latest`` or an
  offset). Without ``--follow`` it stops at the high watermarks seen at the start; with it, it
  long-polls for new records until Ctrl-C.
* **group** (``--group G``): a member of consumer group G; the coordinator assigns the
  partitions, reading starts at the group's committed offsets (else at the end, or at the
  beginning with ``--from-beginning``) and what is printed is committed after each batch.
  Without ``--follow`` it stops at the first poll that finds nothing new once it has
  partitions (or after ``--timeout-ms`` without any); it leaves the group on exit.

``--max-messages N`` stops after N records. Each record prints as its value, prefixed by
offset, key and headers with ``--print-offset``/``--print-key``/``--print-headers``
(tab-separated), or as ``-f/--format`` says (kcat's ``%t %p %o %k %v %h %T`` placeholders,
``\\n`` and ``\\t``: ``yak.cli.record_format``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from yak.cli.cluster import DataDirOption
from yak.cli.proxy import ApiKeyOption, UrlOption, proxy_url, run_or_exit
from yak.cli.record_format import RecordFormat, default_format
from yak.cli.secure import cluster_api_key
from yak.errors import InvalidRequestError
from yak.sdk import (
    AsyncConsumer,
    AsyncPartitionReader,
    ConsumerRecord,
    OffsetReset,
    TopicPartition,
)

__all__ = ["consume"]

_POLL_MS = 1_000


class _Printer:
    """Prints records in a format and counts them down to ``--max-messages``."""

    def __init__(self, record_format: RecordFormat, limit: int | None) -> None:
        self._format = record_format
        self.remaining = limit
        self.done = asyncio.Event()

    def print(self, records: Sequence[ConsumerRecord]) -> list[ConsumerRecord]:
        """Print records until the limit; the ones printed."""
        if self.remaining is not None:
            records = records[: self.remaining]
            self.remaining -= len(records)
            if self.remaining == 0:
                self.done.set()
        if records:
            typer.echo("".join(self._format.render(r) for r in records), nl=False)
        return list(records)


def _start_offset(text: str) -> int | str:
    if text in ("earliest", "latest"):
        return text
    if text.isdigit():
        return int(text)
    raise InvalidRequestError(f"--offset must be earliest, latest or a number, got {text!r}")


# --- stateless reads ------------------------------------------------------------------------


async def _read_partition(
    reader: AsyncPartitionReader,
    topic: str,
    partition: int,
    start: int | str,
    follow: bool,
    printer: _Printer,
) -> None:
    earliest, latest = await reader.offsets(topic, partition)
    offset = {"earliest": earliest, "latest": latest}[start] if isinstance(start, str) else start
    while not printer.done.is_set() and (follow or offset < latest):
        read = await reader.read(topic, partition, offset, timeout_ms=_POLL_MS if follow else 0)
        if not follow:
            read = read._replace(records=[r for r in read.records if r.offset < latest])
            if not read.records and read.next_offset <= offset:
                return  # nothing more below the high watermark seen at the start
            # (a filtered read may answer no record and still move past the ones it dropped)
        printer.print(read.records)
        offset = read.next_offset


async def _read_stateless(
    url: str,
    topic: str,
    partition: int | None,
    start: int | str,
    follow: bool,
    printer: _Printer,
    api_key: str | None = None,
    record_filter: str | None = None,
) -> None:
    async with AsyncPartitionReader(url, api_key=api_key, filter=record_filter) as reader:
        count = await reader.partition_count(topic)
        if partition is not None and not 0 <= partition < count:
            raise InvalidRequestError(f"topic {topic!r} has no partition {partition}")
        partitions = range(count) if partition is None else [partition]
        reading = asyncio.gather(
            *(_read_partition(reader, topic, p, start, follow, printer) for p in partitions)
        )
        stop = asyncio.ensure_future(printer.done.wait())
        waiters: list[asyncio.Future[Any]] = [reading, stop]
        try:
            done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            if reading in done:
                reading.result()  # the first partition's error, if any
        finally:
            for waiter in waiters:
                waiter.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)


# --- group reads ----------------------------------------------------------------------------


async def _read_group(
    url: str,
    topic: str,
    group: str,
    from_beginning: bool,
    follow: bool,
    timeout_ms: int,
    printer: _Printer,
    api_key: str | None = None,
    record_filter: str | None = None,
) -> None:
    reset: OffsetReset = "earliest" if from_beginning else "latest"
    async with AsyncConsumer(
        url, group, [topic], auto_offset_reset=reset, api_key=api_key, filter=record_filter
    ) as consumer:
        idle_since = time.monotonic()
        while not printer.done.is_set():
            records = await consumer.poll(_POLL_MS)
            printed = printer.print(records)
            if printed:
                idle_since = time.monotonic()
                await consumer.commit(
                    {TopicPartition(r.topic, r.partition): r.offset + 1 for r in printed}
                )
            elif not follow and consumer.assignment():
                return  # caught up on every assigned partition
            elif not follow and time.monotonic() - idle_since > timeout_ms / 1000:
                typer.echo(
                    f"no partition of {topic} was assigned to this member of {group} "
                    f"within {timeout_ms} ms",
                    err=True,
                )
                return


def consume(
    topic: Annotated[str, typer.Argument(help="Topic to read.")],
    group: Annotated[
        str | None, typer.Option("--group", "-g", help="Read as a member of this group.")
    ] = None,
    partition: Annotated[
        int | None, typer.Option(help="Read only this partition (default: all; no --group).")
    ] = None,
    offset: Annotated[
        str | None, typer.Option(help="earliest (default), latest or an offset (no --group).")
    ] = None,
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", help="Start at the earliest offset.")
    ] = False,
    follow: Annotated[bool, typer.Option("--follow", help="Wait for new records.")] = False,
    max_messages: Annotated[
        int | None,
        typer.Option("--max-messages", "--max", "-c", min=1, help="Stop after N records."),
    ] = None,
    print_offset: Annotated[bool, typer.Option(help="Print each record's offset.")] = False,
    print_key: Annotated[bool, typer.Option(help="Print each record's key.")] = False,
    print_headers: Annotated[bool, typer.Option(help="Print each record's headers.")] = False,
    record_format: Annotated[
        str | None,
        typer.Option("--format", "-f", help="kcat-like format, e.g. '%k=%v (%p@%o)\\n'."),
    ] = None,
    timeout_ms: Annotated[
        int,
        typer.Option(
            min=0,
            help="With --group and without --follow: give up after this long without partitions.",
        ),
    ] = 10_000,
    record_filter: Annotated[
        str | None,
        typer.Option(
            "--filter",
            help="Only records this expression accepts, applied by the proxy "
            "(docs/filters.md), e.g. 'value.total >= 100'; positions move past the others.",
        ),
    ] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = Path(".yak"),
) -> None:
    """Print the records of TOPIC: statelessly, or as a member of a consumer group."""
    if group is not None and (partition is not None or offset is not None):
        raise typer.BadParameter("--partition and --offset read without a group: drop --group")
    if from_beginning and offset not in (None, "earliest"):
        raise typer.BadParameter("--from-beginning and --offset say different things")
    try:
        printer_format = RecordFormat(
            record_format
            if record_format is not None
            else default_format(print_offset, print_key, print_headers)
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--format") from None
    target = proxy_url(url, data_dir)
    api_key = cluster_api_key(api_key, data_dir)

    async def run() -> None:
        printer = _Printer(printer_format, max_messages)
        if group is not None:
            await _read_group(
                target,
                topic,
                group,
                from_beginning,
                follow,
                timeout_ms,
                printer,
                api_key,
                record_filter,
            )
        else:
            start = _start_offset(offset or "earliest")
            await _read_stateless(
                target, topic, partition, start, follow, printer, api_key, record_filter
            )

    run_or_exit(run())
