"""Yak through the rest-proxy's native JSON API (``/api/v1``), with plain ``httpx``.

Produce: one ``POST /api/v1/topics/{t}/records?acks=all`` per batch, each payload embedded as a
JSON value (``value_encoding`` json, the default), keys as strings; the proxy picks partitions
(murmur2 of the key, else sticky). The batch is acknowledged by the answer; records answered
with an error count as failed. The native API is used rather than Confluent v2 because it is
the proxy's own dialect with the same JSON records and less per-request work (no consumer
instance state; see ``docs/benchmarks.md``).

Consume: a group member (``POST /api/v1/groups/{g}/members``, ``auto_offset_reset`` earliest)
long-polls ``GET …/records?timeout_ms=100&max_bytes=1 MiB`` (values back as JSON) and commits
every polled position at most once a second (``POST …/commit``), as a Kafka consumer's
auto-commit would — at-least-once, like Redis's XACK and NATS's ack.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import httpx
import orjson

from loadtest.peers.drivers.base import Consumer, Driver, Message, Producer
from yak.sdk import AsyncAdmin

__all__ = ["YakRestDriver", "wait_for_leaders"]

POLL_TIMEOUT_MS = 100
POLL_MAX_BYTES = 1024 * 1024
COMMIT_INTERVAL_S = 1.0
REQUEST_TIMEOUT_S = 30.0
_JSON = {"content-type": "application/json"}


def produce_body(messages: Sequence[Message]) -> bytes:
    """The native produce body: ``{"records": [{"key": …, "value": <payload JSON>}, …]}``."""
    parts = []
    for key, payload in messages:
        if key is None:
            parts.append(b'{"value":' + payload + b"}")
        else:
            parts.append(b'{"key":' + orjson.dumps(key) + b',"value":' + payload + b"}")
    return b'{"records":[' + b",".join(parts) + b"]}"


class _RestProducer(Producer):
    def __init__(self, http: httpx.AsyncClient, topic: str) -> None:
        self._http = http
        self._path = f"/api/v1/topics/{topic}/records"

    async def send(self, messages: Sequence[Message]) -> int:
        response = await self._http.post(
            self._path, content=produce_body(messages), params={"acks": "all"}, headers=_JSON
        )
        if response.status_code != 200:
            return len(messages)
        results = orjson.loads(response.content)["results"]
        return sum(1 for r in results if r.get("error") is not None)

    async def close(self) -> None:
        pass  # the driver closes the connection pool


class _RestConsumer(Consumer):
    def __init__(self, http: httpx.AsyncClient, path: str) -> None:
        self._http = http
        self._path = path
        self._last_commit = time.monotonic()

    async def receive(self) -> list[int]:
        response = await self._http.get(
            f"{self._path}/records",
            params={"timeout_ms": POLL_TIMEOUT_MS, "max_bytes": POLL_MAX_BYTES},
        )
        response.raise_for_status()
        records = orjson.loads(response.content)["records"]
        if time.monotonic() - self._last_commit >= COMMIT_INTERVAL_S:
            self._last_commit = time.monotonic()
            (await self._http.post(f"{self._path}/commit")).raise_for_status()
        return [int(r["value"]["t"]) for r in records]

    async def close(self) -> None:
        await self._http.delete(self._path)


async def wait_for_leaders(admin: AsyncAdmin, topic: str, timeout_s: float = 60.0) -> None:
    """Until every partition of ``topic`` has a leader and a full ISR (or ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        described = await admin.describe_topic(topic)
        partitions = described.partitions
        if partitions and all(
            p.leader >= 0 and sorted(p.isr) == sorted(p.replicas) for p in partitions
        ):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: partitions without a leader after {timeout_s} s")
        await asyncio.sleep(0.2)  # another process's state: nothing local to wait on


class YakRestDriver(Driver):
    """Yak behind the rest-proxy at ``url``; topics get replication factor 3."""

    name = "yak-rest"
    description = (
        "Yak rest-proxy native JSON API: POST /api/v1/topics/{t}/records?acks=all per batch, "
        "group member long-poll (max_bytes 1 MiB) + commit each 1 s; RF 3, min.insync 2"
    )

    def __init__(self, url: str, replication_factor: int = 3) -> None:
        self._url = url
        self._replication_factor = replication_factor
        self._admin = AsyncAdmin(url)
        self._clients: list[httpx.AsyncClient] = []

    def _client(self) -> httpx.AsyncClient:
        # One connection pool per producer and consumer, as each would be its own client.
        client = httpx.AsyncClient(base_url=self._url, timeout=REQUEST_TIMEOUT_S)
        self._clients.append(client)
        return client

    async def create_topic(self, topic: str, partitions: int) -> None:
        configs = {"min.insync.replicas": str(min(2, self._replication_factor))}
        await self._admin.create_topic(
            topic,
            partitions=partitions,
            replication_factor=self._replication_factor,
            configs=configs,
        )
        await wait_for_leaders(self._admin, topic)

    async def delete_topic(self, topic: str) -> None:
        await self._admin.delete_topic(topic)

    async def create_producer(self, topic: str) -> Producer:
        return _RestProducer(self._client(), topic)

    async def create_consumer(self, topic: str, subscription: str) -> Consumer:
        http = self._client()
        join = {"topics": [topic], "auto_offset_reset": "earliest", "auto_commit": False}
        response = await http.post(
            f"/api/v1/groups/{subscription}/members", content=orjson.dumps(join), headers=_JSON
        )
        response.raise_for_status()
        member = orjson.loads(response.content)["member_id"]
        return _RestConsumer(http, f"/api/v1/groups/{subscription}/members/{member}")

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()
        self._clients.clear()
        await self._admin.aclose()


class YakRestRf1Driver(YakRestDriver):
    """The same as ``YakRestDriver`` with replication factor 1: like for like with Redis and
    NATS, which run as single nodes without replicas."""

    name = "yak-rest-rf1"
    description = (
        "Yak rest-proxy native JSON API as yak-rest, topics with replication factor 1 "
        "(like for like with the single-node peers)"
    )

    def __init__(self, url: str) -> None:
        super().__init__(url, replication_factor=1)
