"""Yak through its Python SDK (``yak.sdk``): ``AsyncProducer`` and ``AsyncConsumer``.

Produce: every message of a batch goes to ``AsyncProducer.send`` (idempotent, acks=all, the
SDK's own partitioning, linger 5 ms and batching up to 512 KiB per partition batch) and the batch
is acknowledged once every returned future has resolved, awaited one after the other (as a Kafka
client calls ``future.get()`` per record: only a future not yet done suspends; ``gather`` would
add a done callback and a scheduled loop callback per record, ~2 us of the SDK's ~8 us per
1 KiB record). The SDK encodes each partition batch as a Kafka record batch v2 and posts it to
the proxy's native API in binary (``application/vnd.yak.recordbatch.v2``), one idempotent
request per batch; the proxy checks it and forwards the bytes to the leader.

Consume: an ``AsyncConsumer`` group member (``auto_offset_reset`` earliest) polls with a 100 ms
timeout and 1 MiB ``max_bytes`` and commits at most once a second, like the REST driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

from loadtest.peers.drivers.base import Consumer, Message, Producer, payload_timestamp
from loadtest.peers.drivers.yak_rest import YakRestDriver
from yak.errors import YakError
from yak.sdk import AsyncConsumer, AsyncProducer

__all__ = ["YakSdkDriver"]

POLL_TIMEOUT_MS = 100
POLL_MAX_BYTES = 1024 * 1024
COMMIT_INTERVAL_S = 1.0


class _SdkProducer(Producer):
    def __init__(self, producer: AsyncProducer, topic: str) -> None:
        self._producer = producer
        self._topic = topic

    async def send(self, messages: Sequence[Message]) -> int:
        send = self._producer.send
        futures = [await send(self._topic, payload, key=key) for key, payload in messages]
        failed = 0
        for future in futures:  # in turn: only a future not yet done suspends
            try:
                await future
            except (Exception, asyncio.CancelledError):  # counted, as gather's did
                failed += 1
        return failed

    async def close(self) -> None:
        await self._producer.aclose()


class _SdkConsumer(Consumer):
    def __init__(self, consumer: AsyncConsumer) -> None:
        self._consumer = consumer
        self._last_commit = time.monotonic()

    async def receive(self) -> list[int]:
        records = await self._consumer.poll(POLL_TIMEOUT_MS, POLL_MAX_BYTES)
        if time.monotonic() - self._last_commit >= COMMIT_INTERVAL_S:
            self._last_commit = time.monotonic()
            await self._consumer.commit()
        return [payload_timestamp(r.value) for r in records if r.value is not None]

    async def close(self) -> None:
        # Leaving a group the coordinator already forgot is no failure here.
        with contextlib.suppress(YakError):
            await self._consumer.aclose()


class YakSdkDriver(YakRestDriver):
    """Yak through the Python SDK against the rest-proxy at ``url``; topics as the REST
    driver creates them (replication factor 3)."""

    name = "yak-sdk"
    description = (
        "Yak Python SDK: AsyncProducer (idempotent, acks=all, linger 5 ms) and AsyncConsumer "
        "poll(100 ms, 1 MiB) + commit each 1 s; RF 3, min.insync 2"
    )

    def __init__(self, url: str, replication_factor: int = 3) -> None:
        super().__init__(url, replication_factor)
        self._sdk_url = url

    async def create_producer(self, topic: str) -> Producer:
        return _SdkProducer(AsyncProducer(self._sdk_url), topic)

    async def create_consumer(self, topic: str, subscription: str) -> Consumer:
        consumer = AsyncConsumer(self._sdk_url, subscription, [topic], auto_offset_reset="earliest")
        await consumer.start()
        return _SdkConsumer(consumer)
