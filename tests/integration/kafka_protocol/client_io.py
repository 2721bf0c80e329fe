"""The three Python Kafka clients of the compatibility matrix behind one small interface, for
the tests parametrised by client (``CLIENTS``: confluent-kafka, kafka-python, aiokafka).

- ``produce`` sends keyed records with headers from an **idempotent** acks=all producer with
  one compression codec (``CODECS`` says which each client can use here);
- ``read_and_seek`` assigns every partition, reads from the beginning until it has ``count``
  records, then **seeks** each partition to ``seek_to`` and reads again what lies after it;
  both reads come back as ``Records`` ((partition, offset) -> key, value, headers), the shape
  the REST reader of ``test_kafka_clients`` gives, so the tests compare them for equality.

The blocking clients run in a worker thread (``asyncio.to_thread``); aiokafka runs on the
caller's event loop. Each call opens and closes its own client.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioPartition
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentPartition

with warnings.catch_warnings():
    # kafka-python 3 loads its schemas with importlib.resources.read_text (deprecated).
    warnings.filterwarnings("ignore", "(read|open)_text is deprecated", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaPartition

__all__ = ["CLIENTS", "CODECS", "Records", "after", "outgoing", "produce", "read_and_seek"]

#: The matrix's clients, as the test ids name them.
CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")
#: The codecs each client produces with here: kafka-python's snappy needs python-snappy,
#: which neither Yak nor kafka-python brings (it does not use cramjam).
CODECS = {
    "confluent-kafka": ("gzip", "snappy", "lz4", "zstd"),
    "kafka-python": ("gzip", "lz4", "zstd"),
    "aiokafka": ("gzip", "snappy", "lz4", "zstd"),
}
TIMEOUT_S = 30.0
#: (partition, offset) -> (key, value, headers as (key, value) pairs)
Records = dict[tuple[int, int], tuple[bytes | None, bytes | None, tuple[tuple[str, bytes], ...]]]
#: (key, value, headers) of one record to send.
Outgoing = tuple[bytes, bytes, list[tuple[str, bytes]]]


def outgoing(client: str, codec: str, count: int) -> list[Outgoing]:
    """``count`` keyed records with two headers, their keys unique to ``client`` and ``codec``."""
    return [
        (
            f"{client}-{codec}-{i}".encode(),
            f"{codec} value {i} ".encode() * 20,
            [("client", client.encode()), ("n", str(i).encode())],
        )
        for i in range(count)
    ]


async def produce(
    client: str, bootstrap: str, topic: str, codec: str, records: list[Outgoing]
) -> None:
    """Send ``records`` with ``client``'s idempotent acks=all producer compressing with ``codec``;
    returns once every record is acknowledged (raises if one is not)."""
    if client == "aiokafka":
        await _aiokafka_produce(bootstrap, topic, codec, records)
    elif client == "kafka-python":
        await asyncio.to_thread(_kafka_python_produce, bootstrap, topic, codec, records)
    else:
        await asyncio.to_thread(_confluent_produce, bootstrap, topic, codec, records)


def _confluent_produce(bootstrap: str, topic: str, codec: str, records: list[Outgoing]) -> None:
    producer = ConfluentProducer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": codec,
            "partitioner": "murmur2_random",  # Kafka's Java partitioner, as Yak's
        }
    )
    errors: list[object] = []
    for key, value, headers in records:
        pairs: list[tuple[str, str | bytes | None]] = list(headers)
        producer.produce(
            topic,
            key=key,
            value=value,
            headers=pairs,
            on_delivery=lambda error, _message: errors.append(error) if error else None,
        )
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == []


def _kafka_python_produce(bootstrap: str, topic: str, codec: str, records: list[Outgoing]) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, compression_type=codec
    )
    try:
        futures = [producer.send(topic, key=k, value=v, headers=h) for k, v, h in records]
        for future in futures:
            future.get(timeout=TIMEOUT_S)
    finally:
        producer.close()


async def _aiokafka_produce(
    bootstrap: str, topic: str, codec: str, records: list[Outgoing]
) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, compression_type=codec
    )
    await producer.start()
    try:
        sent = [await producer.send(topic, key=k, value=v, headers=h) for k, v, h in records]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


async def read_and_seek(
    client: str, bootstrap: str, topic: str, partitions: int, count: int, seek_to: int
) -> tuple[Records, Records]:
    """Every record from the beginning (``count`` of them), then what follows ``seek_to`` in
    each partition after a seek there (see the module docstring)."""
    if client == "aiokafka":
        return await _aiokafka_read(bootstrap, topic, partitions, count, seek_to)
    read = _kafka_python_read if client == "kafka-python" else _confluent_read
    return await asyncio.to_thread(read, bootstrap, topic, partitions, count, seek_to)


def after(records: Records, seek_to: int) -> int:
    """How many of ``records`` lie at or after offset ``seek_to`` of their partition."""
    return sum(1 for _partition, offset in records if offset >= seek_to)


def _header_pairs(headers: Any) -> tuple[tuple[str, bytes], ...]:
    return tuple((k, bytes(v)) for k, v in headers or [])


def _kafka_python_read(
    bootstrap: str, topic: str, partitions: int, count: int, seek_to: int
) -> tuple[Records, Records]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    assigned = [KafkaPartition(topic, p) for p in range(partitions)]

    def collect(goal: int) -> Records:
        found: Records = {}
        deadline = time.monotonic() + TIMEOUT_S
        while len(found) < goal and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                for m in batch:
                    found[m.partition, m.offset] = (m.key, m.value, _header_pairs(m.headers))
        return found

    try:
        consumer.assign(assigned)
        consumer.seek_to_beginning()
        everything = collect(count)
        for tp in assigned:
            consumer.seek(tp, seek_to)
        return everything, collect(after(everything, seek_to))
    finally:
        consumer.close()


def _confluent_read(
    bootstrap: str, topic: str, partitions: int, count: int, seek_to: int
) -> tuple[Records, Records]:
    consumer = ConfluentConsumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )

    def collect(goal: int) -> Records:
        found: Records = {}
        deadline = time.monotonic() + TIMEOUT_S
        while len(found) < goal and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            m: Any = message  # confluent-kafka's stubs type key/value as str | bytes
            found[m.partition(), m.offset()] = (m.key(), m.value(), _header_pairs(m.headers()))
        return found

    try:
        consumer.assign([ConfluentPartition(topic, p, 0) for p in range(partitions)])
        everything = collect(count)
        for p in range(partitions):  # seek: the partitions are being fetched by now
            consumer.seek(ConfluentPartition(topic, p, seek_to))
        return everything, collect(after(everything, seek_to))
    finally:
        consumer.close()


async def _aiokafka_read(
    bootstrap: str, topic: str, partitions: int, count: int, seek_to: int
) -> tuple[Records, Records]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    assigned = [AioPartition(topic, p) for p in range(partitions)]

    async def collect(goal: int) -> Records:
        found: Records = {}
        deadline = time.monotonic() + TIMEOUT_S
        while len(found) < goal and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                for r in batch:
                    found[r.partition, r.offset] = (r.key, r.value, _header_pairs(r.headers))
        return found

    await consumer.start()
    try:
        consumer.assign(assigned)
        await consumer.seek_to_beginning()
        everything = await collect(count)
        for tp in assigned:
            consumer.seek(tp, seek_to)
        return everything, await collect(after(everything, seek_to))
    finally:
        await consumer.stop()
