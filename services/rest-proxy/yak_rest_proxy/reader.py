"""Reading partitions through their leaders: fetches, offsets, and the retries they need.

``fetch`` long-polls several partitions that may sit on different leaders: one fetch per leader
broker, run concurrently, each waiting up to ``max_wait_ms`` (the broker wakes it on append, so
no polling here), and the answer comes as soon as the first leader returns data. A partition
whose leader moved (``NOT_LEADER_OR_FOLLOWER``, no leader, a broker that cannot be reached) is
reported with its error so the caller can retry it after the metadata changed; records come
back decoded, from the asked offset on (a batch may start below it), at most ``max_bytes``
beyond the first record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import NamedTuple

from yak.errors import YakError
from yak.metadata.cache import MetadataCache
from yak.protocol.broker_models import OffsetResult
from yak.protocol.broker_wire import Buffer, FetchPartition, FetchRequest
from yak.record import Record, iter_records
from yak_rest_proxy.brokers import BrokerPool, leader_of

__all__ = ["PartitionRead", "Reader"]


class PartitionRead(NamedTuple):
    """What one partition gave: records from the asked offset, the offsets, or an error."""

    topic: str
    partition: int
    records: list[Record]
    next_offset: int
    high_watermark: int = -1
    log_start_offset: int = -1
    error: YakError | None = None


class Reader:
    """Fetches and offset look-ups for the proxy's consumers and the stateless read API."""

    def __init__(self, cache: MetadataCache, brokers: BrokerPool) -> None:
        self._cache = cache
        self._brokers = brokers

    async def fetch(
        self,
        positions: Sequence[tuple[str, int, int]],
        *,
        max_wait_ms: int,
        max_bytes: int,
        min_bytes: int = 1,
    ) -> list[PartitionRead]:
        """Read ``(topic, partition, offset)`` triples; one ``PartitionRead`` each."""
        by_broker: dict[int, list[tuple[str, int, int]]] = {}
        failed: list[PartitionRead] = []
        snapshot = self._cache.snapshot
        for topic, partition, offset in positions:
            try:
                broker = leader_of(snapshot, topic, partition)
            except YakError as exc:
                failed.append(PartitionRead(topic, partition, [], offset, error=exc))
                continue
            by_broker.setdefault(broker.broker_id, []).append((topic, partition, offset))
        if not by_broker:
            return failed
        tasks = [
            asyncio.ensure_future(
                self._fetch_from(broker_id, group, max_wait_ms, max_bytes, min_bytes)
            )
            for broker_id, group in by_broker.items()
        ]
        reads = list(failed)
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if not any(r.records for task in done for r in task.result()):
                done, _ = await asyncio.wait(tasks)  # nothing yet: let the others finish
            for task in tasks:
                if task.done():
                    reads.extend(task.result())
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
        return reads

    async def _fetch_from(
        self,
        broker_id: int,
        group: list[tuple[str, int, int]],
        max_wait_ms: int,
        max_bytes: int,
        min_bytes: int,
    ) -> list[PartitionRead]:
        broker = self._cache.snapshot.brokers.get(broker_id)
        offsets = {(t, p): o for t, p, o in group}
        try:
            if broker is None:
                raise YakError(f"broker {broker_id} is gone")
            request = FetchRequest(
                tuple(FetchPartition(t, p, o, max_bytes) for t, p, o in group),
                max_wait_ms=max_wait_ms,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
            )
            # Shielded: the caller cancels the fetches that lost the race, and httpcore leaks
            # the connection of a request cancelled mid-close (encode/httpcore#1093); the
            # fetch ends by itself at its max wait.
            fetched = await asyncio.shield(self._brokers.fetch_client(broker).fetch(request))
        except YakError as exc:
            return [PartitionRead(t, p, [], o, error=exc) for t, p, o in group]
        reads = []
        for part in fetched:
            offset = offsets[(part.topic, part.partition)]
            if part.error is not None:
                error = part.error.exception()
                reads.append(PartitionRead(part.topic, part.partition, [], offset, error=error))
                continue
            records = _records_from(part.records, offset, max_bytes)
            next_offset = records[-1].offset + 1 if records else offset
            reads.append(
                PartitionRead(
                    part.topic,
                    part.partition,
                    records,
                    next_offset,
                    part.high_watermark,
                    part.log_start_offset,
                )
            )
        return reads

    async def list_offsets(self, topic: str, partition: int, timestamp: int | str) -> OffsetResult:
        """ListOffsets of one partition at its leader (``earliest``, ``latest`` or ms)."""
        _, client = self._brokers.leader(topic, partition)
        (result,) = await client.list_offsets([(topic, partition)], timestamp)
        if result.error is not None:
            raise result.error.exception()
        return result


def _records_from(data: Buffer, offset: int, max_bytes: int) -> list[Record]:
    """Decoded records at or past ``offset``; at least one, then up to ``max_bytes``."""
    records: list[Record] = []
    size = 0
    for record in iter_records(data):
        if record.offset < offset:
            continue
        size += len(record.key or b"") + len(record.value or b"")
        if records and size > max_bytes:
            break
        records.append(record)
    return records
