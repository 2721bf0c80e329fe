"""The queue workload of the chaos suite and its final read.

- ``RestProducer``: an idempotent producer written against the REST API alone (``httpx``, no
  SDK): ``POST /api/v1/producers`` for a producer id, then JSON batches to ``POST
  /api/v1/topics/{t}/partitions/{p}/batches?acks=all`` with its producer id, epoch and base
  sequence, one batch in flight. A retriable failure (a dropped connection, a timeout, a 5xx,
  an error code ``retriable``) sends the *same* batch again, through the other proxy after a
  connection failure — the proxy forwards the stamp, so the broker must dedupe it. An
  unknown producer id restamps the batch under a new session, as the SDK does; another
  non-retriable error (an out-of-order sequence) fails the batch and ends the session, as
  in Kafka; a batch still unanswered after ``give_up_s`` is abandoned (not acknowledged)
  and a new session begins. Abandoned batches count as not acknowledged.
- ``SdkProducer``: ``yak.sdk.AsyncProducer`` (idempotent, acks=all) on one proxy, records
  round robin over the partitions, each record's offset from its ``RecordMetadata``.

Every value is ``<producer>:<seq>:`` padded, so the verdict (``verdict``) knows who sent what
in which order. ``read_topic`` reads every partition from offset 0 to its high watermark from
its current leader: what a consumer would get.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Sequence

import httpx

from loadtest.chaos.cluster import ChaosCluster
from loadtest.chaos.verdict import Ack
from loadtest.local_cluster import read_partition
from yak.clients.broker import BrokerClient
from yak.errors import UnknownProducerIdError, YakError, error_for_code
from yak.sdk import AsyncProducer, RecordMetadata

__all__ = ["RestProducer", "SdkProducer", "read_topic"]


def _value(producer: str, sequence: int, size: int) -> bytes:
    return f"{producer}:{sequence}:".encode().ljust(size, b".")


class _Producer:
    def __init__(self, name: str) -> None:
        self.name = name
        self.acks: list[Ack] = []
        self.sent: list[bytes] = []
        self.errors: dict[str, int] = {}

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1


class RestProducer(_Producer):
    """One partition, JSON batches of ``records_per_batch`` (see the module doc)."""

    def __init__(
        self,
        name: str,
        proxies: Sequence[str],
        topic: str,
        partition: int,
        *,
        records_per_batch: int = 4,
        value_size: int = 64,
        give_up_s: float = 60.0,
    ) -> None:
        super().__init__(name)
        self.proxies = list(proxies)
        self.topic, self.partition = topic, partition
        self.records_per_batch, self.value_size = records_per_batch, value_size
        self.give_up_s = give_up_s
        self.sequence = 0  # of the values, across sessions
        self.abandoned = 0
        self._session: tuple[int, int] | None = None
        self._base = 0  # the session's next base sequence for this partition
        self._client = httpx.AsyncClient(timeout=10.0, trust_env=False)

    async def _new_session(self) -> None:
        response = await self._client.post(f"{self.proxies[0]}/api/v1/producers")
        response.raise_for_status()
        body = response.json()
        self._session = (int(body["producer_id"]), int(body["producer_epoch"]))
        self._base = 0

    async def _send(self, values: list[bytes], deadline: float) -> list[int] | None:
        """The offsets of the batch, or None once abandoned."""
        while time.monotonic() < deadline:
            try:
                if self._session is None:
                    await self._new_session()
                assert self._session is not None
                body = {
                    "producer_id": self._session[0],
                    "producer_epoch": self._session[1],
                    "base_sequence": self._base,
                    "records": [{"value": v.decode()} for v in values],
                    "value_encoding": "string",
                }
                path = f"/api/v1/topics/{self.topic}/partitions/{self.partition}/batches"
                response = await self._client.post(
                    f"{self.proxies[0]}{path}", json=body, params={"acks": "all"}
                )
                if response.status_code == 200:
                    self._base += len(values)
                    return [int(o) for o in response.json()["offsets"]]
                error = _error(response)
                self.error(error.code)
                if isinstance(error, UnknownProducerIdError):
                    self._session = None  # restamped under a new session, as the SDK does
                elif not error.retriable and response.status_code < 500:
                    self._session = None  # fatal for the session, as in Kafka: not written
                    return None
            except httpx.HTTPError as exc:
                self.error(type(exc).__name__)
                self.proxies.append(self.proxies.pop(0))  # the other proxy next
            await asyncio.sleep(0.05)
        self._session = None  # its sequence numbers may be taken: start afresh
        return None

    async def run(self, stop: asyncio.Event, interval_s: float = 0.05) -> None:
        while not stop.is_set():
            values = [
                _value(self.name, self.sequence + i, self.value_size)
                for i in range(self.records_per_batch)
            ]
            self.sent.extend(values)
            started = self.sequence
            self.sequence += len(values)
            offsets = await self._send(values, time.monotonic() + self.give_up_s)
            if offsets is None:
                self.abandoned += 1
            else:
                for i, (value, offset) in enumerate(zip(values, offsets, strict=True)):
                    self.acks.append(Ack(self.name, self.partition, started + i, offset, value))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)

    async def aclose(self) -> None:
        await self._client.aclose()


def _error(response: httpx.Response) -> YakError:
    try:
        body = response.json()
        return error_for_code(str(body["code"]), str(body.get("message", "")))
    except (ValueError, KeyError, TypeError):
        return error_for_code("UNKNOWN_SERVER_ERROR", f"HTTP {response.status_code}")


class SdkProducer(_Producer):
    """``AsyncProducer`` on one proxy, ``rate`` records/s round robin over ``partitions``."""

    def __init__(
        self, name: str, proxy: str, topic: str, partitions: int, *, value_size: int = 64
    ) -> None:
        super().__init__(name)
        self.proxy, self.topic, self.partitions = proxy, topic, partitions
        self.value_size = value_size
        self.failed = 0
        self._next: dict[int, int] = {}

    def _done(
        self, partition: int, value: bytes, order: int, future: asyncio.Future[RecordMetadata]
    ) -> None:
        if future.cancelled() or future.exception() is not None:
            self.failed += 1
            self.error(type(future.exception()).__name__ if not future.cancelled() else "cancelled")
            return
        self.acks.append(Ack(self.name, partition, order, future.result().offset, value))

    async def run(self, stop: asyncio.Event, rate: float = 100.0) -> None:
        async with AsyncProducer(
            self.proxy, linger_ms=5, request_timeout_ms=10_000, delivery_timeout_ms=60_000
        ) as producer:
            started, count = time.monotonic(), 0
            while not stop.is_set():
                due = int((time.monotonic() - started) * rate)
                while count < due and not stop.is_set():
                    partition = count % self.partitions
                    order = self._next.get(partition, 0)
                    self._next[partition] = order + 1
                    value = _value(self.name, count, self.value_size)
                    self.sent.append(value)
                    count += 1
                    try:
                        future = await producer.send(self.topic, value, partition=partition)
                    except (YakError, httpx.HTTPError, OSError) as exc:
                        self.failed += 1
                        self.error(type(exc).__name__)
                        continue
                    future.add_done_callback(functools.partial(self._done, partition, value, order))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.02)
            with contextlib.suppress(YakError, httpx.HTTPError, OSError):
                await asyncio.wait_for(producer.flush(), 70.0)


async def read_topic(
    cluster: ChaosCluster, topic: str, attempts: int = 20
) -> dict[int, list[tuple[int, bytes]]]:
    """Every partition of ``topic`` from offset 0 to its high watermark, from its leader
    (retried while leaders move; raises after ``attempts``)."""
    stored: dict[int, list[tuple[int, bytes]]] = {}
    described = await cluster.describe(topic)
    for state in described.partitions:
        for attempt in range(attempts):
            try:
                leader = (await cluster.describe(topic)).partitions[state.partition].leader
                if leader < 0:
                    raise RuntimeError("no leader")
                async with BrokerClient(cluster.broker_url(leader), timeout_s=10.0) as client:
                    stored[state.partition] = await read_partition(client, topic, state.partition)
                break
            except (YakError, OSError, httpx.HTTPError, RuntimeError):
                if attempt == attempts - 1:
                    raise
                await asyncio.sleep(0.5)
    return stored
