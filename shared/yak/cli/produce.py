"""``yak produce TOPIC``: write records to a topic (like kafka-console-producer).

Values come from ``--value`` or, one record per line, from stdin. ``--key`` keys every record
(Kafka's murmur2 partitioner picks the partition, as the Java client would); ``--partition``
pins one; keyless records go to one partition per batch, round robin over the partitions.
Records are sent in batches of up to ``--batch-records`` to each partition's leader, found in
etcd: ``--etcd``/``YAK_ETCD``, else ``<data-dir>/cluster.json`` of ``yak up`` (which also gives
the cluster id). A partition whose leader moved is retried after the metadata catches up.
``--verbose`` prints ``topic-partition@first..last`` per batch. Errors print one line
``error: CODE: message`` and exit with status 1.

``cluster_metadata`` (the etcd connection both ``produce`` and ``consume`` use) lives here.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated

import typer

from yak.clients.broker import BrokerClient
from yak.errors import (
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
    YakError,
)
from yak.metadata.cache import ClusterSnapshot, MetadataCache
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace
from yak.partitioner import partition_for_key
from yak.protocol.broker_wire import ProduceResult
from yak.record import RecordInput, encode_batch

__all__ = [
    "ClusterOptions",
    "cluster_metadata",
    "leader_url",
    "produce",
    "run_or_exit",
]

_RETRIES = 5

EtcdOption = Annotated[
    str | None,
    typer.Option("--etcd", envvar="YAK_ETCD", help="etcd URL (default: from cluster.json)."),
]
ClusterIdOption = Annotated[
    str | None,
    typer.Option("--cluster-id", envvar="YAK_CLUSTER_ID", help="Cluster id (default: local)."),
]
DataDirOption = Annotated[
    Path, typer.Option("--data-dir", help="Data folder of `yak up` holding cluster.json.")
]


class ClusterOptions:
    """Where the cluster's etcd is: flags first, then ``<data-dir>/cluster.json``."""

    def __init__(self, etcd: str | None, cluster_id: str | None, data_dir: Path) -> None:
        document: dict[str, object] = {}
        path = data_dir / "cluster.json"
        if etcd is None or cluster_id is None:
            try:
                document = json.loads(path.read_text())
            except (OSError, ValueError):
                document = {}
        etcd_doc = document.get("etcd")
        found_url = etcd_doc.get("url") if isinstance(etcd_doc, dict) else None
        self.etcd_url = etcd or (str(found_url) if found_url else "http://127.0.0.1:9400")
        self.cluster_id = cluster_id or str(document.get("cluster_id") or "local")


@asynccontextmanager
async def cluster_metadata(options: ClusterOptions) -> AsyncIterator[MetadataCache]:
    """A running metadata cache of the cluster (closed on exit)."""
    store = EtcdMetadataStore.from_url(options.etcd_url)
    cache = MetadataCache(store, Keyspace(options.cluster_id))
    try:
        await cache.start()
        yield cache
    finally:
        await cache.stop()
        await store.aclose()


def leader_url(snapshot: ClusterSnapshot, topic: str, partition: int) -> str:
    """The URL of the live leader of a partition; typed errors when there is none."""
    record = snapshot.topics.get(topic)
    if record is None or record.deleting or (topic, partition) not in snapshot.partitions:
        raise UnknownTopicOrPartitionError(f"unknown topic or partition {topic}-{partition}")
    leader = snapshot.leader_of(topic, partition)
    if leader is None:
        raise LeaderNotAvailableError(f"{topic}-{partition} has no live leader")
    return leader.url


def run_or_exit(coroutine: object) -> None:
    """Run a CLI coroutine; a YakError prints one line and exits with status 1."""
    try:
        asyncio.run(coroutine)  # type: ignore[arg-type]
    except YakError as exc:
        typer.echo(f"error: {exc.code}: {exc.message}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def _values(value: str | None) -> Iterator[bytes]:
    if value is not None:
        yield value.encode()
        return
    for line in sys.stdin.buffer:
        yield line.rstrip(b"\r\n")


def _batches(
    values: Iterable[bytes], key: bytes | None, fixed: int | None, count: int, size: int
) -> Iterator[tuple[int, list[RecordInput]]]:
    """(partition, records) batches of up to ``size`` records, in input order per partition."""
    pending: list[RecordInput] = []
    target = fixed if fixed is not None else (partition_for_key(key, count) if key else 0)
    turn = 0
    for value in values:
        pending.append(RecordInput(key=key, value=value))
        if len(pending) >= size:
            yield target, pending
            pending = []
            if fixed is None and key is None:
                turn += 1
                target = turn % count
    if pending:
        yield target, pending


async def _send(
    cache: MetadataCache,
    clients: dict[str, BrokerClient],
    topic: str,
    p: int,
    batch: bytes,
    acks: int,
) -> ProduceResult:
    for attempt in range(_RETRIES):
        url = leader_url(cache.snapshot, topic, p)
        client = clients.get(url) or clients.setdefault(url, BrokerClient(url))
        try:
            return await client.produce_one(topic, p, batch, acks=acks)
        except (NotLeaderOrFollowerError, LeaderNotAvailableError):
            if attempt == _RETRIES - 1:
                raise
            await asyncio.sleep(0.2 * (attempt + 1))  # let the metadata watch catch up
    raise AssertionError("unreachable")


async def _produce(
    options: ClusterOptions,
    topic: str,
    values: Iterable[bytes],
    key: bytes | None,
    partition: int | None,
    acks: int,
    batch_records: int,
    verbose: bool,
) -> None:
    async with cluster_metadata(options) as cache:
        record = cache.snapshot.topics.get(topic)
        if record is None or record.deleting:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        if partition is not None and not 0 <= partition < record.partitions:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {partition}")
        clients: dict[str, BrokerClient] = {}
        try:
            for p, records in _batches(values, key, partition, record.partitions, batch_records):
                result = await _send(cache, clients, topic, p, encode_batch(records), acks)
                if verbose:
                    last = result.base_offset + len(records) - 1
                    typer.echo(f"{topic}-{p}@{result.base_offset}..{last}")
        finally:
            for client in clients.values():
                await client.aclose()


def produce(
    topic: Annotated[str, typer.Argument(help="Topic to write to.")],
    value: Annotated[
        str | None, typer.Option(help="One record value (default: stdin lines).")
    ] = None,
    key: Annotated[str | None, typer.Option(help="Key of every record.")] = None,
    partition: Annotated[int | None, typer.Option(help="Write to this partition only.")] = None,
    acks: Annotated[int, typer.Option(help="0, 1 or -1 (all).")] = 1,
    batch_records: Annotated[int, typer.Option(min=1, help="Records per batch.")] = 1000,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print offsets.")] = False,
    etcd: EtcdOption = None,
    cluster_id: ClusterIdOption = None,
    data_dir: DataDirOption = Path(".yak"),
) -> None:
    """Write records (``--value`` or stdin lines) to TOPIC."""
    options = ClusterOptions(etcd, cluster_id, data_dir)
    key_bytes = key.encode() if key is not None else None
    run_or_exit(
        _produce(options, topic, _values(value), key_bytes, partition, acks, batch_records, verbose)
    )
