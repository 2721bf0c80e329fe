"""Yak through the rest-proxy's native API with the lean client (``loadtest.latency.lean_http``)
instead of ``httpx``: the same requests as ``loadtest.peers.drivers.yak_rest`` — ``POST
…/records?acks=all`` per batch, a group member long-polling ``GET …/records?timeout_ms=100
&max_bytes=1 MiB`` and committing at most once a second — so that the end-to-end rows of Yak
and Redis pay about the same client cost (issue 34). Topics and the member's join and leave go
through ``YakRestDriver``'s admin client and ``httpx`` (not measured); the produce and the poll
requests, with their heads built once, through the lean client.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import httpx
import orjson

from loadtest.latency.lean_http import LeanPool, ResponseError
from loadtest.peers.drivers.base import Consumer, Message, Producer
from loadtest.peers.drivers.yak_rest import (
    COMMIT_INTERVAL_S,
    POLL_MAX_BYTES,
    POLL_TIMEOUT_MS,
    REQUEST_TIMEOUT_S,
    YakRestDriver,
    produce_body,
)

__all__ = ["LeanRestDriver"]

_JSON = "application/json"


class _LeanProducer(Producer):
    def __init__(self, pool: LeanPool, topic: str) -> None:
        self._pool = pool
        self._head = pool.head("POST", f"/api/v1/topics/{topic}/records?acks=all", _JSON)

    async def send(self, messages: Sequence[Message]) -> int:
        status, content = await self._pool.request(self._head, produce_body(messages))
        if status != 200:
            return len(messages)
        results = orjson.loads(content)["results"]
        return sum(1 for r in results if r.get("error") is not None)

    async def close(self) -> None:
        self._pool.close()


class _LeanConsumer(Consumer):
    def __init__(self, pool: LeanPool, path: str) -> None:
        self._pool = pool
        self._path = path
        target = f"{path}/records?timeout_ms={POLL_TIMEOUT_MS}&max_bytes={POLL_MAX_BYTES}"
        self._poll = pool.head("GET", target)
        self._commit = pool.head("POST", f"{path}/commit")
        self._last_commit = time.monotonic()

    async def receive(self) -> list[int]:
        status, content = await self._pool.request(self._poll)
        if status != 200:
            raise ResponseError(f"poll answered {status}: {content[:200]!r}")
        records = orjson.loads(content)["records"]
        if time.monotonic() - self._last_commit >= COMMIT_INTERVAL_S:
            self._last_commit = time.monotonic()
            status, content = await self._pool.request(self._commit)
            if status >= 300:
                raise ResponseError(f"commit answered {status}: {content[:200]!r}")
        return [int(r["value"]["t"]) for r in records]

    async def close(self) -> None:
        try:
            await self._pool.request(self._pool.head("DELETE", self._path))
        finally:
            self._pool.close()


class LeanRestDriver(YakRestDriver):
    """``YakRestDriver`` whose producers and consumers use the lean client."""

    name = "yak-rest-lean"
    description = (
        "Yak rest-proxy native JSON API as yak-rest, produce and long-poll requests from a "
        "lean HTTP/1.1 client (asyncio protocol, heads built once)"
    )

    async def create_producer(self, topic: str) -> Producer:
        return _LeanProducer(LeanPool(self._url), topic)

    async def create_consumer(self, topic: str, subscription: str) -> Consumer:
        join = {"topics": [topic], "auto_offset_reset": "earliest", "auto_commit": False}
        async with httpx.AsyncClient(base_url=self._url, timeout=REQUEST_TIMEOUT_S) as http:
            response = await http.post(
                f"/api/v1/groups/{subscription}/members",
                content=orjson.dumps(join),
                headers={"content-type": _JSON},
            )
            response.raise_for_status()
        member = orjson.loads(response.content)["member_id"]
        path = f"/api/v1/groups/{subscription}/members/{member}"
        return _LeanConsumer(LeanPool(self._url), path)
