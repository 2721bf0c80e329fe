"""``yak consume TOPIC``: read records of one partition (like kafka-console-consumer).

``--offset`` is ``earliest``, ``latest`` or an offset; ``--max N`` stops after N records.
Without ``--follow`` it reads up to the high watermark seen at the start and exits; with it,
it long-polls for new records until Ctrl-C (or ``--max``). Each record prints as its value
(UTF-8, undecodable bytes replaced); ``--print-offset`` and ``--print-key`` prefix offset and
key, tab-separated. The partition's leader is found in etcd like ``yak produce`` does, and
found again when leadership moves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from yak.cli.produce import (
    ClusterIdOption,
    ClusterOptions,
    DataDirOption,
    EtcdOption,
    cluster_metadata,
    leader_url,
    run_or_exit,
)
from yak.clients.broker import BrokerClient
from yak.errors import InvalidRequestError, LeaderNotAvailableError, NotLeaderOrFollowerError
from yak.metadata.cache import MetadataCache
from yak.record import Record, iter_records

__all__ = ["consume"]

_POLL_MS = 1_000


class _Position:
    """Where reading goes on, and when it stops."""

    def __init__(self, offset: int, stop_at: int | None, remaining: int | None) -> None:
        self.offset = offset
        self.stop_at = stop_at  # the high watermark to stop at (None: follow)
        self.remaining = remaining

    def done(self) -> bool:
        at_end = self.stop_at is not None and self.offset >= self.stop_at
        return at_end or self.remaining == 0


def _start_offset(text: str) -> int | str:
    if text in ("earliest", "latest"):
        return text
    if text.isdigit():
        return int(text)
    raise InvalidRequestError(f"--offset must be earliest, latest or a number, got {text!r}")


def _print(record: Record, print_offset: bool, print_key: bool) -> None:
    parts = []
    if print_offset:
        parts.append(str(record.offset))
    if print_key:
        parts.append((record.key or b"").decode(errors="replace"))
    parts.append((record.value or b"").decode(errors="replace"))
    typer.echo("\t".join(parts))


async def _offsets(client: BrokerClient, topic: str, partition: int) -> tuple[int, int]:
    """The partition's log start offset and high watermark."""
    found = []
    for stamp in ("earliest", "latest"):
        (result,) = await client.list_offsets([(topic, partition)], stamp)
        if result.error is not None:
            raise result.error.exception()
        found.append(result.offset)
    return found[0], found[1]


async def _consume(
    options: ClusterOptions,
    topic: str,
    partition: int,
    start: str,
    follow: bool,
    limit: int | None,
    flags: tuple[bool, bool],
) -> None:
    async with cluster_metadata(options) as cache:
        clients: dict[str, BrokerClient] = {}
        try:
            await _read(cache, clients, topic, partition, start, follow, limit, flags)
        finally:
            for client in clients.values():
                await client.aclose()


async def _read(
    cache: MetadataCache,
    clients: dict[str, BrokerClient],
    topic: str,
    partition: int,
    start: str,
    follow: bool,
    limit: int | None,
    flags: tuple[bool, bool],
) -> None:
    def leader() -> BrokerClient:
        url = leader_url(cache.snapshot, topic, partition)
        return clients.get(url) or clients.setdefault(url, BrokerClient(url))

    earliest, latest = await _offsets(leader(), topic, partition)
    named = _start_offset(start)
    offset = {"earliest": earliest, "latest": latest}[named] if isinstance(named, str) else named
    position = _Position(offset, None if follow else latest, limit)
    while not position.done():
        try:
            fetched = await leader().fetch_one(
                topic, partition, position.offset, max_wait_ms=_POLL_MS if follow else 0
            )
        except (NotLeaderOrFollowerError, LeaderNotAvailableError):
            await cache.wait_for(lambda s: s.revision > cache.revision, timeout_s=5)
            continue
        for record in iter_records(fetched.records):
            if record.offset < position.offset:
                continue  # a batch starts before the position: skip its earlier records
            _print(record, *flags)
            position.offset = record.offset + 1
            if position.remaining is not None:
                position.remaining -= 1
            if position.done():
                return
        if not follow and not len(fetched.records):
            return  # nothing more below the high watermark seen at the start (e.g. trimmed)


def consume(
    topic: Annotated[str, typer.Argument(help="Topic to read.")],
    partition: Annotated[int, typer.Option(help="Partition to read.")] = 0,
    offset: Annotated[str, typer.Option(help="earliest, latest or an offset.")] = "earliest",
    max_records: Annotated[
        int | None, typer.Option("--max", min=1, help="Stop after this many records.")
    ] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Wait for new records.")] = False,
    print_offset: Annotated[bool, typer.Option(help="Print each record's offset.")] = False,
    print_key: Annotated[bool, typer.Option(help="Print each record's key.")] = False,
    etcd: EtcdOption = None,
    cluster_id: ClusterIdOption = None,
    data_dir: DataDirOption = Path(".yak"),
) -> None:
    """Print the records of one partition of TOPIC."""
    options = ClusterOptions(etcd, cluster_id, data_dir)
    flags = (print_offset, print_key)
    run_or_exit(_consume(options, topic, partition, offset, follow, max_records, flags))
