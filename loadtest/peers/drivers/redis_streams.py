"""Redis Streams: pipelined XADD to produce, XREADGROUP + XACK to consume (``redis.asyncio``).

One stream per topic (as the OpenMessaging Benchmark's Redis driver; Redis has no partitions),
each message one stream entry with the payload in field ``p``. A producer sends a batch as one
pipeline of XADDs (no MULTI) and the batch is acknowledged when every reply arrived. A
subscription is a consumer group created at id 0 (from the first entry); a consumer reads with
``XREADGROUP … COUNT 1000 BLOCK 100 STREAMS topic >`` and acknowledges what it read with one
XACK per batch. Durability is the server's (``servers.RedisServer``: AOF, fsync every second).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import cast

from redis.asyncio import Redis

from loadtest.peers.drivers.base import Consumer, Driver, Message, Producer, payload_timestamp

__all__ = ["RedisStreamsDriver"]

READ_COUNT = 1_000
BLOCK_MS = 100
_FIELD = b"p"
#: XREADGROUP's RESP2 answer: [(stream, [(entry id, {field: value})])].
_ReadAnswer = list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]


class _RedisProducer(Producer):
    def __init__(self, redis: Redis, stream: str) -> None:
        self._redis = redis
        self._stream = stream

    async def send(self, messages: Sequence[Message]) -> int:
        pipe = self._redis.pipeline(transaction=False)
        for _key, payload in messages:
            pipe.xadd(self._stream, {_FIELD: payload})
        replies = await pipe.execute(raise_on_error=False)
        return sum(1 for r in replies if isinstance(r, Exception))

    async def close(self) -> None:
        pass  # the driver closes the connection


class _RedisConsumer(Consumer):
    def __init__(self, redis: Redis, stream: str, group: str, name: str) -> None:
        self._redis = redis
        self._stream = stream
        self._group = group
        self._name = name

    async def receive(self) -> list[int]:
        answer = cast(
            "_ReadAnswer",
            await self._redis.xreadgroup(
                self._group, self._name, {self._stream: ">"}, count=READ_COUNT, block=BLOCK_MS
            ),
        )
        if not answer:
            return []
        entries = answer[0][1]
        stamps = [payload_timestamp(fields[_FIELD]) for _id, fields in entries]
        await self._redis.xack(self._stream, self._group, *(entry_id for entry_id, _ in entries))
        return stamps

    async def close(self) -> None:
        pass  # the driver closes the connection


class RedisStreamsDriver(Driver):
    """Redis Streams at ``url`` (``redis://127.0.0.1:port``)."""

    name = "redis"
    description = (
        "Redis Streams, pipelined XADD (one pipeline per batch), XREADGROUP COUNT 1000 + XACK; "
        "appendonly yes, appendfsync everysec; one stream per topic"
    )

    def __init__(self, url: str) -> None:
        self._url = url
        self._clients: list[Redis] = []
        self._names = itertools.count()

    def _client(self) -> Redis:
        # One connection per producer and consumer, as each would be its own client.
        client = Redis.from_url(self._url)
        self._clients.append(client)
        return client

    async def create_topic(self, topic: str, partitions: int) -> None:
        await self._client().delete(topic)

    async def delete_topic(self, topic: str) -> None:
        await self._client().delete(topic)

    async def create_producer(self, topic: str) -> Producer:
        return _RedisProducer(self._client(), topic)

    async def create_consumer(self, topic: str, subscription: str) -> Consumer:
        client = self._client()
        groups = await client.xinfo_groups(topic) if await client.exists(topic) else []
        if not any(g["name"].decode() == subscription for g in groups):
            await client.xgroup_create(topic, subscription, id="0", mkstream=True)
        return _RedisConsumer(client, topic, subscription, f"c{next(self._names)}")

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()
        self._clients.clear()
