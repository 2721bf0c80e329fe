"""The runner's pacing against an in-memory system: a rate whose acknowledgements take 100 ms
is still offered (batches grow while the producer waits for its window), and a low rate is
not exceeded. (The bucket's depth above ``BATCH_MAX / TICK_S`` was measured when it was fixed,
aac1caf: a wall-clock rate of 200,000 msg/s is not a test on a shared 2-core machine.)"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from loadtest.peers.drivers.base import Consumer, Driver, Message, Producer, payload_timestamp
from loadtest.peers.runner import IN_FLIGHT, TICK_S, Runner
from loadtest.peers.workload import Workload


class _Topic:
    def __init__(self) -> None:
        self.stamps: asyncio.Queue[list[int]] = asyncio.Queue()


class _Producer(Producer):
    def __init__(self, topic: _Topic, ack_s: float) -> None:
        self._topic = topic
        self._ack_s = ack_s

    async def send(self, messages: Sequence[Message]) -> int:
        if self._ack_s:
            await asyncio.sleep(self._ack_s)
        self._topic.stamps.put_nowait([payload_timestamp(payload) for _key, payload in messages])
        return 0

    async def close(self) -> None:
        pass


class _Consumer(Consumer):
    def __init__(self, topic: _Topic) -> None:
        self._topic = topic

    async def receive(self) -> list[int]:
        try:
            return await asyncio.wait_for(self._topic.stamps.get(), 0.05)
        except TimeoutError:
            return []

    async def close(self) -> None:
        pass


class _InMemory(Driver):
    name = "in-memory"
    description = "acknowledges every batch at once"

    def __init__(self, ack_s: float = 0.0) -> None:
        self.topics: dict[str, _Topic] = {}
        self.ack_s = ack_s

    async def create_topic(self, topic: str, partitions: int) -> None:
        self.topics[topic] = _Topic()

    async def delete_topic(self, topic: str) -> None:
        self.topics.pop(topic, None)

    async def create_producer(self, topic: str) -> Producer:
        return _Producer(self.topics[topic], self.ack_s)

    async def create_consumer(self, topic: str, subscription: str) -> Consumer:
        return _Consumer(self.topics[topic])

    async def aclose(self) -> None:
        pass


def _fixed(rate: int) -> Workload:
    return Workload(
        name=f"fixed-{rate}",
        message_size=64,
        producer_rate=rate,
        duration_s=1.0,
        warmup_s=0.2,
    )


@pytest.mark.timeout(60)
async def test_a_slow_acknowledgement_does_not_cap_a_paced_rate() -> None:
    """Batches acknowledged after 100 ms, offered 30,000/s: ``IN_FLIGHT`` batches of a tick's
    worth (150 messages) would hold 1,200 in flight, 12,000/s; while the producer waits for
    the window the bucket fills, so its next batches are ``BATCH_MAX`` long."""
    rate = 30_000
    assert IN_FLIGHT * rate * TICK_S / 0.1 < 0.5 * rate  # what a window of batches allowed
    result = await Runner(_InMemory(ack_s=0.1), _fixed(rate)).run()
    assert result.publish_rate >= 0.9 * rate, (result.publish_rate, rate)


@pytest.mark.timeout(60)
async def test_a_low_rate_is_not_exceeded() -> None:
    rate = 5_000
    result = await Runner(_InMemory(), _fixed(rate)).run()
    assert 0.9 * rate <= result.publish_rate <= 1.05 * rate, (result.publish_rate, rate)


def test_the_kafka_driver_lingers_for_throughput_only_where_throughput_is_measured() -> None:
    from loadtest.peers.drivers.yak_kafka import (
        LATENCY_LINGER_MS,
        THROUGHPUT_LINGER_MS,
        YakKafkaDriver,
    )

    driver = YakKafkaDriver("http://127.0.0.1:1")
    driver.configure(Workload(name="max", producer_rate=0))
    assert driver.linger_ms == THROUGHPUT_LINGER_MS
    driver.configure(Workload(name="fixed", producer_rate=10_000))
    assert driver.linger_ms == LATENCY_LINGER_MS
    driver.configure(Workload(name="backlog", producer_rate=0, backlog_records=1_000))
    assert driver.linger_ms == THROUGHPUT_LINGER_MS
    assert THROUGHPUT_LINGER_MS > LATENCY_LINGER_MS
