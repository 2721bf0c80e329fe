"""Yak's Python client SDK: producer, consumer and admin over a rest-proxy's native API.

Async first — ``AsyncProducer``, ``AsyncConsumer``, ``AsyncShareConsumer`` (a share group's
member: a queue, records answered one by one), ``AsyncAdmin`` (and ``AsyncPartitionReader``
for group-less reads) — with blocking twins ``Producer``, ``Consumer``, ``ShareConsumer`` and
``Admin`` that run the async objects on a private event loop thread. Every
error is a typed ``yak.errors.YakError``; keys, values and headers are bytes (``str`` is sent
as UTF-8)::

    async with AsyncProducer("http://127.0.0.1:9430") as producer:
        delivery = await producer.send("orders", b'{"id": 1}', key="customer-7")
        print(await delivery)                  # RecordMetadata(topic, partition, offset, ...)

    async with AsyncConsumer(url, "billing", ["orders"], auto_offset_reset="earliest") as c:
        async for record in c:
            handle(record)
            await c.commit()
"""

from yak.sdk.admin import AsyncAdmin, ResetTarget
from yak.sdk.consumer import AsyncConsumer, OffsetReset
from yak.sdk.producer import Acks, AsyncProducer
from yak.sdk.reader import AsyncPartitionReader, PartitionRead
from yak.sdk.records import ConsumerRecord, RecordMetadata
from yak.sdk.sender import Compression
from yak.sdk.share_consumer import AckFailure, AsyncShareConsumer, ShareRecord
from yak.sdk.sync import Admin, Consumer, Producer, ShareConsumer
from yak.types import TopicPartition

__all__ = [
    "AckFailure",
    "Acks",
    "Admin",
    "AsyncAdmin",
    "AsyncConsumer",
    "AsyncPartitionReader",
    "AsyncProducer",
    "AsyncShareConsumer",
    "Compression",
    "Consumer",
    "ConsumerRecord",
    "OffsetReset",
    "PartitionRead",
    "Producer",
    "RecordMetadata",
    "ResetTarget",
    "ShareConsumer",
    "ShareRecord",
    "TopicPartition",
]
