"""Yak through its brokers' Kafka listeners with confluent-kafka (librdkafka), as a Kafka user
would drive it.

Produce: one ``confluent_kafka.Producer`` per runner producer, with the settings a Kafka user
picks for throughput under full durability — ``acks=all`` and ``enable.idempotence`` (Kafka
3's defaults), ``batch.size`` 1 MiB (librdkafka's default is 1 MB already) and ``linger.ms``
by the workload (``configure``): 50 ms where a maximum rate or a backlog is measured (tuned
for throughput, as Confluent advises 10-100 ms), 5 ms at a fixed rate (Kafka 4's default and
what the SDK driver uses, where latency is measured), up to 10,000
messages a batch, no compression (the peers' payloads are mostly padding: compressing them
would measure the codec, and Redis and NATS store them as they are), Kafka's Java partitioner
(``murmur2_random``; the runner sends no keys, so records go to sticky partitions). Each record
of a runner batch is handed to ``produce`` on the event loop (a C call); its delivery report
counts down the batch, and the last one resolves the batch's future through
``call_soon_threadsafe``. Delivery reports are served by a thread of the producer's own that
calls ``poll`` in a loop (librdkafka runs callbacks in the thread that polls).

Consume: one ``confluent_kafka.Consumer`` group member per runner consumer
(``auto.offset.reset`` earliest, ``fetch.wait.max.ms`` 100 like the other drivers' poll
timeout, auto-commit of the positions read every second, as the other drivers commit;
``fetch.queue.backoff.ms`` 100 — librdkafka's default of 1 s postpones a partition's next
fetch that long whenever its prefetch queue went over ``queued.min.messages`` or
``queued.max.messages.kbytes``, which a backlog drain does at once; librdkafka's docs say to
lower it when an application sees ~1 s gaps, and a 300,000-record drain went from 78,000 to
259,000-327,000 records/s with it at 10-100 ms), its blocking reads — ``poll(0.1 s)`` for
the first message, then ``consume(999, 0)`` for what librdkafka prefetched
(``consume(1000, 0.1 s)`` alone waits for 1,000 messages or the timeout, which held records
back for up to 100 ms at 10,000 msg/s) — run on a one-thread executor of its own (the client is not
thread-safe; the runner's consumers must not queue behind each other in the loop's default
pool). ``create_consumer`` returns once the member holds its partitions (the group's first
rebalance waits ``group.initial.rebalance.delay.ms``: 0 on ``yak up``'s brokers, as in Kafka's
shipped server.properties; 3 s is the default), so the runner's
consumers are members before its producers start; a backlog drain, timed from creating the
consumers, includes that join as the runner says.

Topics are created as the REST driver creates them (RF 3, ``min.insync.replicas`` 2, through
the rest-proxy's admin API); the bootstrap is every broker's Kafka address from the proxy's
``GET /api/v1/cluster``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError, Message
from confluent_kafka import Producer as ConfluentProducer

from loadtest.peers.drivers.base import Consumer, Producer, payload_timestamp
from loadtest.peers.drivers.base import Message as Outgoing
from loadtest.peers.drivers.yak_rest import YakRestDriver
from loadtest.peers.workload import Workload

__all__ = [
    "CONSUMER_SETTINGS",
    "LATENCY_LINGER_MS",
    "PRODUCER_SETTINGS",
    "THROUGHPUT_LINGER_MS",
    "YakKafkaDriver",
]

#: ``linger.ms`` by what a workload asks (``YakKafkaDriver.configure``): 5 ms (Kafka 4's
#: default) where latency is measured at a fixed rate, 50 ms where a maximum rate or a backlog
#: is — Confluent's advice for throughput is 10-100 ms. At 120,000 msg/s offered, 1 KiB, RF 3,
#: one sitting: linger 5 ms published 86,579/s with the client at 0.87 core (librdkafka's
#: threads 0.5), 20 ms 97,249/s, 50 ms 104,983/s with the client at 0.50 core; the brokers'
#: CPU per record was the same (9.3-9.9 µs, docs/performance.md).
LATENCY_LINGER_MS = 5
THROUGHPUT_LINGER_MS = 50
PRODUCER_SETTINGS: dict[str, str | int | bool] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": LATENCY_LINGER_MS,
    "batch.size": 1024 * 1024,
    "batch.num.messages": 10_000,
    "compression.type": "none",
    "partitioner": "murmur2_random",
}
CONSUMER_SETTINGS: dict[str, str | int | bool] = {
    "auto.offset.reset": "earliest",
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 1_000,
    "fetch.wait.max.ms": 100,
    "fetch.queue.backoff.ms": 100,
}
CONSUME_COUNT = 1_000
CONSUME_TIMEOUT_S = 0.1
POLL_S = 0.05
CLOSE_TIMEOUT_S = 30.0
JOIN_TIMEOUT_S = 60.0


class _Batch:
    """One runner batch in flight: delivery reports count it down (in the poll thread)."""

    __slots__ = ("failed", "future", "left", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop, count: int) -> None:
        self.loop = loop
        self.future: asyncio.Future[int] = loop.create_future()
        self.left = count
        self.failed = 0

    def delivered(self, error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            self.failed += 1
        self.left -= 1
        if self.left == 0:
            self.loop.call_soon_threadsafe(_resolve, self.future, self.failed)


def _resolve(future: asyncio.Future[int], failed: int) -> None:
    if not future.done():
        future.set_result(failed)


class _KafkaProducer(Producer):
    def __init__(self, bootstrap: str, topic: str, linger_ms: int) -> None:
        self._producer = ConfluentProducer(
            {"bootstrap.servers": bootstrap, **PRODUCER_SETTINGS, "linger.ms": linger_ms}
        )
        self._topic = topic
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="yak-kafka-poll", daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(POLL_S)

    async def send(self, messages: Sequence[Outgoing]) -> int:
        batch = _Batch(asyncio.get_running_loop(), len(messages))
        produce, topic, delivered = self._producer.produce, self._topic, batch.delivered
        for key, payload in messages:
            produce(topic, payload, key, on_delivery=delivered)
        return await batch.future

    async def close(self) -> None:
        await asyncio.to_thread(self._producer.flush, CLOSE_TIMEOUT_S)
        self._stop.set()
        await asyncio.to_thread(self._poller.join)


class _KafkaConsumer(Consumer):
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="yak-kafka-consume")
        self._consumer = ConfluentConsumer(
            {"bootstrap.servers": bootstrap, "group.id": group, **CONSUMER_SETTINGS}
        )
        self._assigned = False
        self._early: list[int] = []  # read while joining: handed out by the first receive
        self._consumer.subscribe([topic], on_assign=self._on_assign)

    def _on_assign(self, _consumer: Any, _partitions: Any) -> None:
        self._assigned = True  # in the consume thread, inside ``consume``

    async def join(self) -> None:
        """Poll until the group gave this member its partitions (Kafka's first rebalance of
        an empty group waits ``group.initial.rebalance.delay.ms``)."""
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while not self._assigned:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no partitions assigned after {JOIN_TIMEOUT_S} s")
            self._early += await self.receive()

    def _consume(self) -> list[int]:
        # ``consume(n, timeout)`` returns only once it holds ``n`` messages or the timeout ran
        # out: at 10,000 msg/s that held every record until 1,000 had come (0-100 ms, e2e p50
        # 60 ms). Wait for the first like the other drivers' blocking reads, then take what
        # librdkafka has prefetched without waiting.
        first = self._consumer.poll(CONSUME_TIMEOUT_S)
        if first is None:
            return []
        messages = [first, *self._consumer.consume(CONSUME_COUNT - 1, 0)]
        stamps = []
        for message in messages:
            if message.error() is not None:
                continue  # partition EOF and the like: nothing delivered
            value: Any = message.value()
            stamps.append(payload_timestamp(value))
        return stamps

    async def receive(self) -> list[int]:
        stamps = await asyncio.get_running_loop().run_in_executor(self._pool, self._consume)
        if self._early:
            stamps, self._early = self._early + stamps, []
        return stamps

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._pool, self._consumer.close)
        self._pool.shutdown()


class YakKafkaDriver(YakRestDriver):
    """Yak's Kafka listeners through confluent-kafka; the rest-proxy at ``url`` creates the
    topics and names the brokers' Kafka addresses."""

    name = "yak-kafka"
    description = (
        "Yak Kafka listener, confluent-kafka (librdkafka): idempotent acks=all producer, "
        "linger.ms 50 for a maximum rate or a backlog and 5 at a fixed rate, batch.size 1 MiB, "
        "no compression; group consumer poll(100 ms) then "
        "consume(999, 0) + auto-commit each 1 s, fetch.queue.backoff.ms 100; RF 3, min.insync 2"
    )

    def __init__(self, url: str, replication_factor: int = 3) -> None:
        super().__init__(url, replication_factor)
        self._bootstrap = ""
        #: Seconds each ``create_consumer`` took to join its group, in order (for reports).
        self.joins_s: list[float] = []
        self.linger_ms = LATENCY_LINGER_MS

    def configure(self, workload: Workload) -> None:
        """Producers tuned as a Kafka user tunes them for the workload's question: for
        throughput when it asks for a maximum rate or writes a backlog, else for latency."""
        throughput = workload.max_rate or workload.backlog_records > 0
        self.linger_ms = THROUGHPUT_LINGER_MS if throughput else LATENCY_LINGER_MS

    async def bootstrap(self) -> str:
        """Every live broker's Kafka address, ``host:port,...`` (asked once)."""
        if not self._bootstrap:
            cluster = await self._admin.cluster()
            self._bootstrap = ",".join(b.kafka for b in cluster.brokers if b.kafka)
            if not self._bootstrap:
                raise RuntimeError("no broker has a Kafka listener")
        return self._bootstrap

    async def create_producer(self, topic: str) -> Producer:
        return _KafkaProducer(await self.bootstrap(), topic, self.linger_ms)

    async def create_consumer(self, topic: str, subscription: str) -> Consumer:
        started = time.monotonic()
        consumer = _KafkaConsumer(await self.bootstrap(), topic, subscription)
        await consumer.join()
        self.joins_s.append(time.monotonic() - started)
        return consumer
