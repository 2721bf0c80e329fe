"""``yak produce TOPIC``: write records through the rest-proxy (like kafka-console-producer).

Values come from ``--value`` or, one record per line, from stdin (read in a thread, so records
typed by hand go out at once — the SDK batches only behind a request in flight, up to
``--linger-ms`` — without waiting for the next line). ``--key`` keys
every record; ``-K SEP`` takes each line's key from before the first ``SEP`` instead. Kafka's
murmur2 partitioner picks a keyed record's partition, as the Java client would; ``--partition``
pins one; keyless records stick to a partition per batch. Records go through the SDK's
``AsyncProducer``: batched (``--batch-records``, ``--linger-ms``), idempotent with
``--acks all`` (the default), retried without duplicates. ``--verbose`` prints
``topic-partition@offset`` per record. ``--deliver-after 30s`` (``500ms``, ``2m`` ...) or
``--deliver-at 2026-12-06T10:00:00Z`` delays every record for share groups (the topic needs
``delayed.delivery.enable=true``; ``yak.cli.scheduled`` parses them). Errors print one line
``error: CODE: message`` and exit with status 1 (see ``yak.cli.proxy`` for how the proxy is
found).
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated

import typer

from yak.cli.cluster import DataDirOption
from yak.cli.proxy import ApiKeyOption, UrlOption, proxy_url, run_or_exit
from yak.cli.scheduled import parse_deliver_at, parse_duration_ms
from yak.cli.secure import cluster_api_key
from yak.sdk import Acks, AsyncProducer, Compression, RecordMetadata

__all__ = ["parse_headers", "produce"]

_READ_AHEAD = 10_000  # stdin lines read ahead of the producer
_ACKS: dict[str, Acks] = {"all": "all", "-1": "all", "1": "1", "0": "0"}
_CODECS: dict[str, Compression] = {name: name for name in ("none", "gzip", "snappy", "lz4", "zstd")}


def parse_headers(pairs: list[str] | None) -> list[tuple[str, bytes]]:
    """``["k=v", ...]`` as header pairs; a pair without ``=`` is a usage error."""
    headers = []
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected key=value, got {pair!r}", param_hint="--header")
        headers.append((key, value.encode()))
    return headers


async def _stdin_lines() -> AsyncIterator[bytes]:
    """Lines of stdin without their line end, read by a thread (at most ``_READ_AHEAD`` ahead)."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()
    slots = threading.Semaphore(_READ_AHEAD)

    def pump() -> None:
        try:
            for line in sys.stdin.buffer:
                slots.acquire()
                loop.call_soon_threadsafe(lines.put_nowait, line)
            loop.call_soon_threadsafe(lines.put_nowait, None)
        except RuntimeError:  # the loop closed: the command is over
            return

    threading.Thread(target=pump, name="yak-stdin", daemon=True).start()
    while (line := await lines.get()) is not None:
        slots.release()
        yield line.rstrip(b"\r\n")


async def _values(value: str | None) -> AsyncIterator[bytes]:
    if value is not None:
        yield value.encode()
        return
    async for line in _stdin_lines():
        yield line


def _print(metadata: RecordMetadata) -> None:
    typer.echo(f"{metadata.topic}-{metadata.partition}@{metadata.offset}")


async def _produce(
    producer: AsyncProducer,
    topic: str,
    values: AsyncIterator[bytes],
    key: bytes | None,
    separator: bytes | None,
    partition: int | None,
    headers: list[tuple[str, bytes]],
    verbose: bool,
    delay: tuple[int | None, int | None] = (None, None),
) -> None:
    """Send each value; ``delay`` is (deliver_after_ms, deliver_at) of every record."""
    after_ms, at_ms = delay
    waiting: deque[asyncio.Future[RecordMetadata]] = deque()
    async with producer:
        async for line in values:
            record_key, value = key, line
            if separator is not None:
                found, sep, rest = line.partition(separator)
                record_key, value = (found, rest) if sep else (None, line)
            waiting.append(
                await producer.send(
                    topic,
                    value,
                    key=record_key,
                    partition=partition,
                    headers=headers,
                    deliver_after_ms=after_ms,
                    deliver_at=at_ms,
                )
            )
            while waiting and waiting[0].done():  # report (and fail) in input order
                metadata = waiting.popleft().result()
                if verbose:
                    _print(metadata)
        await producer.flush()
        while waiting:
            metadata = await waiting.popleft()
            if verbose:
                _print(metadata)


def produce(
    topic: Annotated[str, typer.Argument(help="Topic to write to.")],
    value: Annotated[
        str | None, typer.Option(help="One record value (default: stdin lines).")
    ] = None,
    key: Annotated[str | None, typer.Option(help="Key of every record.")] = None,
    key_separator: Annotated[
        str | None,
        typer.Option("--key-separator", "-K", help="Each line is KEY<SEP>VALUE (like kcat -K)."),
    ] = None,
    partition: Annotated[int | None, typer.Option(help="Write to this partition only.")] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", "-H", help="A header key=value (repeatable).")
    ] = None,
    acks: Annotated[
        str, typer.Option(help="all (-1): every in-sync replica, 1: the leader, 0: none.")
    ] = "all",
    batch_records: Annotated[int, typer.Option(min=1, help="Most records per batch.")] = 1000,
    linger_ms: Annotated[
        int,
        typer.Option(
            min=0, help="Longest wait to fill a batch while another is in flight (idle: none)."
        ),
    ] = 5,
    compression: Annotated[
        str, typer.Option(help="none, gzip, snappy, lz4 or zstd (with acks all).")
    ] = "none",
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print offsets.")] = False,
    deliver_after: Annotated[
        str | None,
        typer.Option(help="Hold every record back from share groups for 30s, 500ms, 2m ..."),
    ] = None,
    deliver_at: Annotated[
        str | None,
        typer.Option(help="Hold every record back until 2026-12-06T10:00:00Z (or epoch ms)."),
    ] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = Path(".yak"),
) -> None:
    """Write records (``--value`` or stdin lines) to TOPIC."""
    if key is not None and key_separator is not None:
        raise typer.BadParameter("give --key or --key-separator, not both")
    if key_separator == "":
        raise typer.BadParameter("the key separator cannot be empty", param_hint="--key-separator")
    headers = parse_headers(header)
    wire_acks = _ACKS.get(acks.lower())
    if wire_acks is None:
        raise typer.BadParameter(f"use all, -1, 1 or 0, not {acks!r}", param_hint="--acks")
    codec = _CODECS.get(compression.lower())
    if codec is None:
        raise typer.BadParameter(f"unknown codec {compression!r}", param_hint="--compression")
    if deliver_after is not None and deliver_at is not None:
        raise typer.BadParameter("give --deliver-after or --deliver-at, not both")
    delay = (
        None if deliver_after is None else parse_duration_ms(deliver_after),
        None if deliver_at is None else parse_deliver_at(deliver_at),
    )
    target = proxy_url(url, data_dir)

    async def run() -> None:
        producer = AsyncProducer(
            target,
            api_key=cluster_api_key(api_key, data_dir),
            acks=wire_acks,
            idempotent=wire_acks == "all",
            batch_max_records=batch_records,
            linger_ms=linger_ms,
            compression=codec,
        )
        await _produce(
            producer,
            topic,
            _values(value),
            key.encode() if key is not None else None,
            key_separator.encode() if key_separator is not None else None,
            partition,
            headers,
            verbose,
            delay,
        )

    run_or_exit(run())
