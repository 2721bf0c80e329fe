"""``AsyncProducer``: writes records to topics through a rest-proxy's native API.

``await producer.send(topic, value, key=...)`` picks the partition and queues the record; it
returns a future that resolves to the record's ``RecordMetadata`` once the batch holding it was
written (or to its typed ``YakError``). Partitions are chosen here, exactly as Kafka's Java
client does (``yak.partitioner``): murmur2 of the key bytes over the topic's partition count,
keyless records sticky to one partition per batch (``partitioner="sticky"``, the default), in
turn (``"round_robin"``) or sticky per batch away from the most loaded leaders
(``"load_aware"``: the brokers' load samples and the leaders come from the proxy's metadata
API, cached and refreshed in the background, ``yak.sdk.cluster_load``); the count comes from
``GET /api/v1/topics/{t}`` and is looked up again after an ``UNKNOWN_TOPIC_OR_PARTITION``.
Batching, linger (adaptive: an idle producer sends at once, ``linger_ms`` bounds the wait
behind requests in flight), retries and idempotence are the ``Sender``'s (``yak.sdk.sender``).

``send`` waits only for the topic's metadata and for buffer space (``buffer_max_bytes`` of
records not yet delivered; a batch gives its records' bytes back when it completes), each for
at most ``max_block_ms``; with both at hand (the common case) it does not suspend. Per record,
``send`` only appends to its partition's open batch; encoding, buffer accounting and resolving
the records' futures are done per batch, as in Kafka's producer. ``flush`` sends everything now
and waits for it; ``aclose`` (or leaving ``async with``) flushes and closes. One event loop;
use ``yak.sdk.Producer`` from threads.

**Delays.** ``send(..., deliver_after_ms=, deliver_at=)`` holds a record back from share
groups until a due time (docs/queues.md, "Delayed and scheduled delivery"): it becomes the
record's ``yak-deliver-at`` header (``yak.delays``), computed from this producer's clock when
``send`` is called. The rules that need no topic are checked here (one of the two, a delay
>= 0, a zoned time after 2000, no ``yak-deliver-at`` header of the caller's own beside them:
``InvalidDelayError`` at once); the proxy checks them again with the topic's
``delayed.delivery.enable`` and ``delayed.delivery.max.ms`` and fails the record's future with
``DelaysNotEnabledError`` or ``InvalidDelayError``.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Literal

import httpx

from yak.api.records import INT64_MAX
from yak.closing import AsyncClosing
from yak.delays import DELIVER_AT_HEADER, delay_header, resolve_delay
from yak.errors import (
    InvalidConfigError,
    InvalidDelayError,
    InvalidRecordError,
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
)
from yak.partitioner import (
    PARTITIONERS,
    LoadAwarePartitioner,
    Partitioner,
    PartitionerName,
    RoundRobinPartitioner,
    StickyPartitioner,
)
from yak.record import RecordInput
from yak.sdk._client import ApiClient
from yak.sdk.accumulator import RECORD_OVERHEAD, record_size
from yak.sdk.cluster_load import ProxyClusterLoad
from yak.sdk.metadata import TopicMetadata
from yak.sdk.records import Data, Headers, RecordMetadata, as_bytes, header_list
from yak.sdk.sender import Compression, Sender, SenderConfig

__all__ = ["Acks", "AsyncProducer", "DeliverAt", "with_delay"]

#: A due time: epoch milliseconds, or a ``datetime`` with its time zone.
DeliverAt = int | datetime

#: Acknowledgement asked of the brokers: every in-sync replica, the leader, or none.
Acks = Literal["all", "1", "0", -1, 0, 1]
_ACKS: dict[object, Literal["all", "1", "0"]] = {
    "all": "all",
    "-1": "all",
    -1: "all",
    "1": "1",
    1: "1",
    "0": "0",
    0: "0",
}


def with_delay(
    headers: tuple[tuple[str, bytes | None], ...],
    deliver_after_ms: int | None,
    deliver_at: DeliverAt | None,
    now_ms: int,
) -> tuple[tuple[str, bytes | None], ...]:
    """``headers`` and the ``yak-deliver-at`` header of the delay asked for (see the module
    doc); raises ``InvalidDelayError`` for what is wrong whatever the topic."""
    if isinstance(deliver_at, datetime):
        if deliver_at.utcoffset() is None:
            raise InvalidDelayError(
                f"deliver_at {deliver_at.isoformat()!r} has no time zone; give one or epoch ms"
            )
        deliver_at = int(deliver_at.timestamp() * 1000)
    if any(key == DELIVER_AT_HEADER for key, _ in headers):
        raise InvalidDelayError(
            f"give deliver_after_ms/deliver_at or a {DELIVER_AT_HEADER} header, not both"
        )
    # The topic's delayed.delivery.max.ms is the proxy's to check: no bound here but int64.
    due = resolve_delay(deliver_after_ms, deliver_at, now_ms, INT64_MAX - now_ms)
    if due is None:  # pragma: no cover - resolve_delay answers a time when one was given
        return headers
    return (*headers, delay_header(due))


class _Buffer:
    """Bytes of records queued and not yet delivered; ``reserve`` waits while over the limit."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._used = 0
        self._freed = asyncio.Event()

    def _fits(self, size: int) -> bool:
        # A record larger than the whole buffer still goes once the buffer is empty.
        return not self._used or self._used + size <= self._limit

    def try_reserve(self, size: int) -> bool:
        """Take ``size`` bytes if they fit now (the common case, without a coroutine)."""
        used = self._used
        if not used or used + size <= self._limit:  # _fits, inline: once per record
            self._used += size
            return True
        return False

    async def reserve(self, size: int, timeout_s: float) -> None:
        if not self._fits(size):
            try:
                async with asyncio.timeout(timeout_s):
                    while not self._fits(size):
                        self._freed.clear()
                        await self._freed.wait()
            except TimeoutError:
                raise KafkaTimeoutError(
                    f"no buffer space for a {size:,}-byte record within {timeout_s:g} s "
                    f"({self._used:,} bytes of {self._limit:,} wait for delivery)"
                ) from None
        self._used += size

    def release(self, size: int) -> None:
        self._used -= size
        self._freed.set()


class AsyncProducer(AsyncClosing):
    """Sends records to the rest-proxy at ``url`` (see the module docstring).

    ``idempotent`` (default): one producer session, per-partition sequence numbers and
    resends of the same batch, so retries never write a record twice; needs ``acks="all"``.
    ``compression`` is the codec of each stored batch (idempotent mode; without it the
    proxy's own setting applies). ``retries`` None: retry until ``delivery_timeout_ms``.
    """

    def __init__(
        self,
        url: str,
        *,
        linger_ms: int = 5,
        batch_max_records: int = 10_000,
        batch_max_bytes: int = 512 * 1024,
        compression: Compression = "none",
        acks: Acks = "all",
        idempotent: bool = True,
        retries: int | None = None,
        delivery_timeout_ms: int = 120_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        request_timeout_ms: int = 45_000,
        max_block_ms: int = 60_000,
        buffer_max_bytes: int = 32 * 1024 * 1024,
        transport: httpx.AsyncBaseTransport | None = None,
        api_key: str | None = None,
        username: str | None = None,
        password: str | None = None,
        partitioner: PartitionerName = "sticky",
    ) -> None:
        wire_acks = _ACKS.get(acks)
        if wire_acks is None:
            raise InvalidConfigError(f"acks must be all, -1, 1 or 0, not {acks!r}")
        if idempotent and wire_acks != "all":
            raise InvalidConfigError("an idempotent producer needs acks=all (as in Kafka)")
        if not idempotent and compression != "none":
            raise InvalidConfigError(
                "compression is chosen per batch in idempotent mode only; without it the "
                "proxy compresses as configured (YAK_COMPRESSION)"
            )
        if linger_ms < 0 or delivery_timeout_ms <= 0 or max_block_ms < 0:
            raise InvalidConfigError("linger_ms, delivery_timeout_ms, max_block_ms out of range")
        if batch_max_records < 1 or batch_max_bytes < 1 or buffer_max_bytes < 1:
            raise InvalidConfigError("batch and buffer sizes must be positive")
        if partitioner not in PARTITIONERS:
            raise InvalidConfigError(
                f"partitioner must be one of {', '.join(PARTITIONERS)}, not {partitioner!r}"
            )
        self._api = ApiClient(
            url,
            timeout_s=request_timeout_ms / 1000,
            transport=transport,
            api_key=api_key,
            username=username,
            password=password,
        )
        self._metadata = TopicMetadata(self._api, max_block_ms)
        self._buffer = _Buffer(buffer_max_bytes)
        self._sender = Sender(
            self._api,
            self._metadata,
            SenderConfig(
                linger_ms=linger_ms,
                batch_max_records=batch_max_records,
                batch_max_bytes=batch_max_bytes,
                compression=compression,
                acks=wire_acks,
                idempotent=idempotent,
                retries=retries,
                delivery_timeout_ms=delivery_timeout_ms,
                retry_backoff_ms=retry_backoff_ms,
                retry_backoff_max_ms=retry_backoff_max_ms,
            ),
            self._buffer.release,
        )
        self._cluster_load: ProxyClusterLoad | None = None
        self._partitioner: Partitioner
        if partitioner == "load_aware":
            self._cluster_load = ProxyClusterLoad(self._api)
            self._partitioner = LoadAwarePartitioner(self._cluster_load, batch_max_bytes)
        elif partitioner == "round_robin":
            self._partitioner = RoundRobinPartitioner()
        else:
            self._partitioner = StickyPartitioner(batch_bytes=batch_max_bytes)
        self._max_block_s = max_block_ms / 1000
        self._loop: asyncio.AbstractEventLoop | None = None  # the one it runs on, from send
        self._closed = False

    @property
    def url(self) -> str:
        return self._api.url

    async def partitions_for(self, topic: str) -> int:
        """The topic's partition count (``UnknownTopicOrPartitionError`` if it has none)."""
        return await self._metadata.partition_count(topic)

    async def send(
        self,
        topic: str,
        value: Data | None,
        *,
        key: Data | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        deliver_after_ms: int | None = None,
        deliver_at: DeliverAt | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; the future resolves once it was written (see the class doc).

        ``timestamp`` (ms) defaults to now, as Kafka's producer stamps a record's create time.
        ``deliver_after_ms`` / ``deliver_at`` delay it for share groups (the module doc).
        Raises at once for an unknown topic or partition, a timestamp outside 0..2**63-1
        (``InvalidRecordError``), a bad delay (``InvalidDelayError``) and when out of buffer
        space.
        """
        if self._closed:
            raise RuntimeError("the producer is closed")
        # The common case, bytes and no headers, without calls (this runs once per record).
        key_bytes = key if key is None or type(key) is bytes else as_bytes(key)
        value_bytes = value if value is None or type(value) is bytes else as_bytes(value)
        if headers is None:
            header_pairs: tuple[tuple[str, bytes | None], ...] = ()
            size = RECORD_OVERHEAD + len(key_bytes or b"") + len(value_bytes or b"")
        else:
            header_pairs = header_list(headers)
            size = record_size(key_bytes, value_bytes, header_pairs)
        if deliver_after_ms is not None or deliver_at is not None:
            now_ms = time.time_ns() // 1_000_000
            header_pairs = with_delay(header_pairs, deliver_after_ms, deliver_at, now_ms)
            size = record_size(key_bytes, value_bytes, header_pairs)
        count = self._metadata.cached(topic)  # no coroutine on the hot path
        if count is None:
            count = await self._metadata.partition_count(topic)
        if partition is None:
            partition = self._partitioner.partition(topic, key_bytes, count, size)
        elif not 0 <= partition < count:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} has no partition {partition} (it has {count})",
                topic=topic,
                partition=partition,
            )
        if timestamp is None:
            timestamp = time.time_ns() // 1_000_000
        elif not 0 <= timestamp <= INT64_MAX:
            raise InvalidRecordError(f"timestamp {timestamp} is outside 0..2**63-1 (ms)")
        if not self._buffer.try_reserve(size):
            await self._buffer.reserve(size, self._max_block_s)
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        future: asyncio.Future[RecordMetadata] = loop.create_future()
        self._sender.append(
            topic,
            partition,
            RecordInput(key_bytes, value_bytes, header_pairs, timestamp),
            future,
            size,
        )
        return future

    async def send_and_wait(
        self,
        topic: str,
        value: Data | None,
        *,
        key: Data | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        deliver_after_ms: int | None = None,
        deliver_at: DeliverAt | None = None,
    ) -> RecordMetadata:
        """``send`` and wait for the record to be written."""
        future = await self.send(
            topic,
            value,
            key=key,
            headers=headers,
            partition=partition,
            timestamp=timestamp,
            deliver_after_ms=deliver_after_ms,
            deliver_at=deliver_at,
        )
        return await future

    async def flush(self) -> None:
        """Send every queued record now and wait until each was written or failed."""
        waiting = self._sender.undelivered()
        if not waiting:
            return
        self._sender.begin_flush()
        try:
            await asyncio.wait(waiting)
        finally:
            self._sender.end_flush()

    async def aclose(self) -> None:
        """Deliver what is queued, then release the connections (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._sender.close()
        finally:
            await self._metadata.aclose()
            if self._cluster_load is not None:
                await self._cluster_load.aclose()
            await self._api.aclose()
