"""``yak topics dump`` / ``restore``: a topic's records and shape in a folder, and back.

Layout of a dump folder (format ``yak-topic-dump``, version 1)::

    DIR/topic.json              the manifest: topic name, partition count, replication factor,
                                config overrides, when it was dumped, and per partition its
                                file, log start offset, end offset (the high watermark read at
                                the start of the dump) and record count
    DIR/partition-00000.jsonl   one JSON object per line and record, in offset order:
                                {"offset": 7, "timestamp": 1764000000000,
                                 "key": "<base64>" | null, "value": "<base64>" | null,
                                 "headers": [{"key": "trace", "value": "<base64>" | null}]}

Keys, values and header values are base64 so any bytes survive; ``null`` is a null key or
value (a tombstone). A dump reads each partition from its log start to the high watermark
seen when the dump began (records produced meanwhile are left out), through the rest-proxy
with the SDK's ``AsyncPartitionReader`` — only committed records, as any consumer sees them.

``restore`` creates the topic (the manifest's name or ``--topic NEW``) with the same
partition count, config overrides and replication factor (or ``--replication-factor``),
refusing an existing topic, then produces each partition's records to the same partition in
file order with their keys, headers and timestamps, through an idempotent acks=all
``AsyncProducer`` (one batch in flight per partition, so order holds and retries never
duplicate). Offsets are assigned anew from 0: a restored partition holds the same records in
the same order, and its offsets match the dump's only when those started at 0 without gaps
(no retention, no compaction). With ``message.timestamp.type=LogAppendTime`` the broker
stamps its own time instead of the dumped one.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yak.errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError, YakError
from yak.sdk import AsyncAdmin, AsyncPartitionReader, AsyncProducer, ConsumerRecord
from yak.sdk.records import RecordMetadata

__all__ = [
    "DumpedRecord",
    "Manifest",
    "PartitionFile",
    "dump_topic",
    "parse_record_line",
    "read_manifest",
    "record_line",
    "restore_topic",
]

FORMAT = "yak-topic-dump"
MANIFEST = "topic.json"
_READ_BYTES = 1024 * 1024

#: Called with the number of records just dumped or restored (a progress bar's advance).
Advance = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class DumpedRecord:
    """One record of a dump file."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionFile:
    partition: int
    file: str
    log_start_offset: int
    end_offset: int
    records: int


@dataclass(frozen=True, slots=True)
class Manifest:
    topic: str
    partitions: int
    replication_factor: int
    configs: dict[str, str]
    dumped_at_ms: int
    files: tuple[PartitionFile, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": 1,
            "topic": self.topic,
            "partitions": self.partitions,
            "replication_factor": self.replication_factor,
            "configs": self.configs,
            "dumped_at_ms": self.dumped_at_ms,
            "partition_files": [
                {
                    "partition": f.partition,
                    "file": f.file,
                    "log_start_offset": f.log_start_offset,
                    "end_offset": f.end_offset,
                    "records": f.records,
                }
                for f in self.files
            ],
        }

    @classmethod
    def from_json(cls, document: object) -> Manifest:
        """The manifest of a dump; ``ValueError`` when it is not one."""
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} manifest")
        if document.get("version") != 1:
            raise ValueError(f"unsupported dump version {document.get('version')!r}")
        try:
            files = tuple(
                PartitionFile(
                    int(f["partition"]),
                    str(f["file"]),
                    int(f["log_start_offset"]),
                    int(f["end_offset"]),
                    int(f["records"]),
                )
                for f in document["partition_files"]
            )
            manifest = cls(
                topic=str(document["topic"]),
                partitions=int(document["partitions"]),
                replication_factor=int(document["replication_factor"]),
                configs={str(k): str(v) for k, v in dict(document["configs"]).items()},
                dumped_at_ms=int(document["dumped_at_ms"]),
                files=files,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed manifest: {exc!r}") from None
        if sorted(f.partition for f in files) != list(range(manifest.partitions)):
            raise ValueError("the manifest does not list one file per partition")
        return manifest


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: object) -> bytes | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f"expected base64 text or null, got {type(text).__name__}")
    return base64.b64decode(text, validate=True)


def record_line(record: ConsumerRecord | DumpedRecord) -> str:
    """One line of a partition file (without the newline)."""
    return json.dumps(
        {
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key": _b64(record.key),
            "value": _b64(record.value),
            "headers": [{"key": k, "value": _b64(v)} for k, v in record.headers],
        },
        separators=(",", ":"),
    )


def parse_record_line(line: str) -> DumpedRecord:
    """A record from one line of a partition file; ``ValueError`` when malformed."""
    item = json.loads(line)
    if not isinstance(item, dict):
        raise ValueError("a record line is a JSON object")
    offset, timestamp, headers = item.get("offset"), item.get("timestamp"), item.get("headers", [])
    if not isinstance(offset, int) or not isinstance(timestamp, int):
        raise ValueError("offset and timestamp must be integers")
    if not isinstance(headers, list) or not all(
        isinstance(h, dict) and isinstance(h.get("key"), str) for h in headers
    ):
        raise ValueError("headers must be a list of {key, value}")
    return DumpedRecord(
        offset=offset,
        timestamp=timestamp,
        key=_unb64(item.get("key")),
        value=_unb64(item.get("value")),
        headers=tuple((h["key"], _unb64(h.get("value"))) for h in headers),
    )


def _partition_file(partition: int) -> str:
    return f"partition-{partition:05d}.jsonl"


async def _dump_partition(
    reader: AsyncPartitionReader, topic: str, partition: int, path: Path, advance: Advance
) -> PartitionFile:
    start, end = await reader.offsets(topic, partition)
    offset, count = start, 0
    with path.open("w") as out:
        while offset < end:
            try:
                read = await reader.read(topic, partition, offset, max_bytes=_READ_BYTES)
            except OffsetOutOfRangeError:  # retention removed the head meanwhile
                offset, _ = await reader.offsets(topic, partition)
                continue
            kept = [r for r in read.records if offset <= r.offset < end]
            for record in kept:
                out.write(record_line(record) + "\n")
            count += len(kept)
            advance(len(kept))
            if read.next_offset <= offset:
                break  # nothing more below the end (e.g. a compacted tail)
            offset = read.next_offset
    return PartitionFile(partition, path.name, start, end, count)


async def dump_topic(
    url: str, topic: str, folder: Path, *, api_key: str | None = None, advance: Advance
) -> Manifest:
    """Dump ``topic`` into ``folder`` (created; must not hold a dump already)."""
    manifest_path = folder / MANIFEST
    if await asyncio.to_thread(manifest_path.exists):
        raise FileExistsError(f"{manifest_path} exists: dump into an empty folder")
    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    async with (
        AsyncAdmin(url, api_key=api_key) as admin,
        AsyncPartitionReader(url, api_key=api_key) as reader,
    ):
        described = await admin.describe_topic(topic)
        files = []
        for p in range(described.partition_count):
            path = folder / _partition_file(p)
            files.append(await _dump_partition(reader, topic, p, path, advance))
    manifest = Manifest(
        topic=topic,
        partitions=described.partition_count,
        replication_factor=described.replication_factor,
        configs=dict(described.configs),
        dumped_at_ms=int(time.time() * 1000),
        files=tuple(files),
    )
    manifest_path.write_text(json.dumps(manifest.to_json(), indent=2) + "\n")
    return manifest


def read_manifest(folder: Path) -> Manifest:
    """The manifest of the dump in ``folder``; ``ValueError``/``OSError`` if there is none."""
    return Manifest.from_json(json.loads((folder / MANIFEST).read_text()))


def _records(path: Path) -> Iterator[DumpedRecord]:
    with path.open() as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    yield parse_record_line(line)
                except ValueError as exc:
                    raise ValueError(f"{path}:{number}: {exc}") from None


async def _wait_until_producible(admin: AsyncAdmin, topic: str, partitions: int) -> None:
    """The proxy's metadata may trail the coordinator's by a moment after a create."""
    async with asyncio.timeout(30):
        while True:
            with contextlib.suppress(UnknownTopicOrPartitionError):
                described = await admin.describe_topic(topic)
                led = [p for p in described.partitions if p.leader >= 0]
                if len(led) == partitions:
                    return
            await asyncio.sleep(0.1)  # another process's metadata: nothing local to await


async def restore_topic(
    url: str,
    folder: Path,
    *,
    topic: str | None = None,
    replication_factor: int | None = None,
    api_key: str | None = None,
    advance: Advance,
) -> tuple[str, int]:
    """Restore the dump in ``folder``; the topic's name and the records produced."""
    manifest = read_manifest(folder)
    name = topic or manifest.topic
    async with AsyncAdmin(url, api_key=api_key) as admin:
        await admin.create_topic(
            name,
            partitions=manifest.partitions,
            replication_factor=replication_factor or manifest.replication_factor,
            configs=manifest.configs,
        )
        await _wait_until_producible(admin, name, manifest.partitions)
    failures: list[BaseException] = []

    def delivered(future: asyncio.Future[RecordMetadata]) -> None:
        if future.cancelled():
            failures.append(RuntimeError("a send was cancelled"))
        elif (error := future.exception()) is not None:
            failures.append(error)
        else:
            advance(1)

    produced = 0
    async with AsyncProducer(url, api_key=api_key, linger_ms=20) as producer:
        for f in sorted(manifest.files, key=lambda f: f.partition):
            for record in _records(folder / f.file):
                future = await producer.send(
                    name,
                    record.value,
                    key=record.key,
                    headers=record.headers,
                    partition=f.partition,
                    timestamp=record.timestamp,
                )
                future.add_done_callback(delivered)
                produced += 1
                if failures:
                    break
        await producer.flush()
    if failures:
        error = failures[0]
        if isinstance(error, YakError):
            raise error
        raise RuntimeError(f"restore failed: {error!r}")
    return name, produced
