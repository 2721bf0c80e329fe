"""Writes straight to the partitions' leaders for the queue benchmark's prefills, surviving
leader changes: each partition is an idempotent producer (its own producer id, epoch 0,
sequence numbers), and a batch answered with a retriable error (a leader that moved, a
timeout) is sent again, unchanged, to the leader the admin API names then, so the broker's
idempotence keeps it from being appended twice. ``LeaderWriter.retries`` counts those retries
(the benchmark reports them: a leader change under load is a finding of its own).

Single event loop; the leaders are looked up again only after a failure.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable, Sequence

from yak.clients.admin import AdminClient
from yak.clients.broker import BrokerClient
from yak.errors import YakError
from yak.record import RecordInput, encode_batch

__all__ = ["LeaderWriter"]

RETRY_PAUSE_S = 0.2
MAX_ATTEMPTS = 100


class LeaderWriter:
    """acks=all batches to the leaders of ``topic``'s partitions (see the module doc)."""

    def __init__(self, admin: AdminClient, broker_urls: dict[int, str], topic: str) -> None:
        self._admin = admin
        self._topic = topic
        self._clients = {b: BrokerClient(url, timeout_s=60) for b, url in broker_urls.items()}
        self._leaders: dict[int, int] = {}
        self._sequences: dict[int, int] = {}
        self.retries = 0

    async def leaders(self) -> dict[int, int]:
        described = await self._admin.describe_topic(self._topic)
        self._leaders = {p.partition: p.leader for p in described.partitions}
        return dict(self._leaders)

    def _producer_id(self, partition: int) -> int:
        return zlib.crc32(f"{self._topic}/{partition}".encode()) & 0x7FFF_FFFF

    async def send(self, partition: int, records: Sequence[RecordInput]) -> None:
        """Append ``records`` to ``partition`` once, retrying what may be retried."""
        sequence = self._sequences.get(partition, 0)
        self._sequences[partition] = sequence + len(records)
        batch = encode_batch(
            records,
            producer_id=self._producer_id(partition),
            producer_epoch=0,
            base_sequence=sequence,
        )
        for _ in range(MAX_ATTEMPTS):
            leader = self._leaders.get(partition, -1)
            if leader in self._clients:
                try:
                    await self._clients[leader].produce_one(self._topic, partition, batch, acks=-1)
                    return
                except (YakError, OSError) as exc:
                    if isinstance(exc, YakError) and not exc.retriable:
                        raise
            self.retries += 1
            await asyncio.sleep(RETRY_PAUSE_S)  # another process's election: nothing to wait on
            await self.leaders()
        raise TimeoutError(f"{self._topic}-{partition}: not written after {MAX_ATTEMPTS} tries")

    async def fill(
        self, batches: int, make: Callable[[int, int], Sequence[RecordInput]], tasks: int
    ) -> None:
        """``batches`` batches into every partition, ``make(partition, n)`` building the n-th;
        each partition's in order (its sequence numbers), at most ``tasks`` sends at once."""
        gate = asyncio.Semaphore(tasks)

        async def partition_sender(partition: int) -> None:
            for n in range(batches):
                async with gate:
                    await self.send(partition, make(partition, n))

        await asyncio.gather(*(partition_sender(p) for p in sorted(await self.leaders())))

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
