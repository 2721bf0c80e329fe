"""NATS JetStream: async publish with acks, pull consumers with fetch + ack (``nats-py``).

One stream per topic (file storage, subject = the topic name; JetStream has no partitions in
this sense). A producer sends a batch as ``publish_async`` per message — each returns a future
that resolves on the stream's PubAck — and the batch is acknowledged when every future has.
A subscription is a durable pull consumer (deliver all, explicit ack, ``max_ack_pending``
large enough not to throttle); a consumer fetches up to 1,000 messages (100 ms wait) and acks
each (an ack is a fire-and-forget publish, as in every NATS client). Durability is the
server's (``servers.NatsServer``: JetStream file store; nats-server 2.9 syncs to disk on its
own schedule, not per message).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import nats
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from loadtest.peers.drivers.base import Consumer, Driver, Message, Producer, payload_timestamp

__all__ = ["NatsJetStreamDriver"]

FETCH_BATCH = 1_000
FETCH_WAIT_S = 0.1
MAX_PENDING = 20_000
MAX_ACK_PENDING = 100_000


def _stream(topic: str) -> str:
    return topic.replace(".", "_").replace("-", "_")


class _NatsProducer(Producer):
    def __init__(self, js: JetStreamContext, subject: str) -> None:
        self._js = js
        self._subject = subject

    async def send(self, messages: Sequence[Message]) -> int:
        futures = [await self._js.publish_async(self._subject, p) for _key, p in messages]
        results = await asyncio.gather(*futures, return_exceptions=True)
        return sum(1 for r in results if isinstance(r, BaseException))

    async def close(self) -> None:
        pass  # the driver closes the connection


class _NatsConsumer(Consumer):
    def __init__(self, subscription: JetStreamContext.PullSubscription) -> None:
        self._subscription = subscription

    async def receive(self) -> list[int]:
        try:
            messages = await self._subscription.fetch(FETCH_BATCH, timeout=FETCH_WAIT_S)
        except TimeoutError:  # nothing within the wait: nats.errors.TimeoutError, or the bare
            return []  # asyncio one nats-py's fetch raises when its deadline ran out under load
        stamps = [payload_timestamp(m.data) for m in messages]
        for message in messages:
            await message.ack()
        return stamps

    async def close(self) -> None:
        await self._subscription.unsubscribe()


class NatsJetStreamDriver(Driver):
    """JetStream on the nats-server at ``url`` (``nats://127.0.0.1:port``)."""

    name = "nats"
    description = (
        "NATS JetStream, publish_async per message (futures gathered per batch), durable pull "
        "consumer fetch(1000) + ack; file storage; one stream per topic"
    )

    def __init__(self, url: str) -> None:
        self._url = url
        self._connections: list[NatsClient] = []

    async def _js(self) -> JetStreamContext:
        # One connection per producer and consumer, as each would be its own client.
        connection = await nats.connect(self._url)
        self._connections.append(connection)
        return connection.jetstream(publish_async_max_pending=MAX_PENDING)

    async def create_topic(self, topic: str, partitions: int) -> None:
        js = await self._js()
        config = StreamConfig(name=_stream(topic), subjects=[topic], storage=StorageType.FILE)
        await js.add_stream(config)

    async def delete_topic(self, topic: str) -> None:
        js = await self._js()
        with contextlib.suppress(NotFoundError):
            await js.delete_stream(_stream(topic))

    async def create_producer(self, topic: str) -> Producer:
        return _NatsProducer(await self._js(), topic)

    async def create_consumer(self, topic: str, subscription: str) -> Consumer:
        js = await self._js()
        config = ConsumerConfig(
            durable_name=subscription,
            deliver_policy=DeliverPolicy.ALL,
            ack_policy=AckPolicy.EXPLICIT,
            max_ack_pending=MAX_ACK_PENDING,
            max_waiting=512,
        )
        pull = await js.pull_subscribe(
            topic, durable=subscription, stream=_stream(topic), config=config
        )
        return _NatsConsumer(pull)

    async def aclose(self) -> None:
        for connection in self._connections:
            await connection.close()
        self._connections.clear()
