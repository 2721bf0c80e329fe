"""``TopicMetadata``: the partition count of each topic a producer writes, cached.

Counts come from ``GET /api/v1/topics/{t}`` and are kept until ``invalidate`` (the producer
calls it when a send answers ``UNKNOWN_TOPIC_OR_PARTITION``: the topic may have been deleted,
re-created or grown). Concurrent lookups of one topic share one request. A topic that does not
exist raises ``UnknownTopicOrPartitionError`` at once (topics are never created by writing to
them); other retriable errors are retried, with backoff, for up to ``max_wait_ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from yak.api.admin import TopicDescription
from yak.clients._http import segment
from yak.errors import KafkaTimeoutError, UnknownTopicOrPartitionError, YakError
from yak.sdk._client import ApiClient

__all__ = ["TopicMetadata"]

_BACKOFF_S = 0.1
_BACKOFF_MAX_S = 1.0


class TopicMetadata:
    """Partition counts by topic (see the module docstring). One event loop."""

    def __init__(self, api: ApiClient, max_wait_ms: int) -> None:
        self._api = api
        self._max_wait_s = max_wait_ms / 1000
        self._counts: dict[str, int] = {}
        self._lookups: dict[str, asyncio.Task[int]] = {}

    def cached(self, topic: str) -> int | None:
        return self._counts.get(topic)

    def invalidate(self, topic: str) -> None:
        self._counts.pop(topic, None)

    async def partition_count(self, topic: str) -> int:
        found = self._counts.get(topic)
        if found is not None:
            return found
        lookup = self._lookups.get(topic)
        if lookup is None:
            lookup = self._lookups[topic] = asyncio.create_task(self._fetch(topic))
            lookup.add_done_callback(lambda _: self._lookups.pop(topic, None))
        # shield: one caller giving up must not cancel the lookup the others wait for.
        return await asyncio.shield(lookup)

    async def aclose(self) -> None:
        for lookup in list(self._lookups.values()):
            lookup.cancel()
            with contextlib.suppress(asyncio.CancelledError, YakError):
                await lookup

    async def _fetch(self, topic: str) -> int:
        deadline = time.monotonic() + self._max_wait_s
        backoff = _BACKOFF_S
        while True:
            try:
                described = await self._api.call(
                    "GET", f"/topics/{segment(topic)}", TopicDescription
                )
            except UnknownTopicOrPartitionError:
                raise
            except YakError as exc:
                if not exc.retriable:
                    raise
                if time.monotonic() + backoff > deadline:
                    raise KafkaTimeoutError(
                        f"no metadata for topic {topic!r} within {self._max_wait_s:g} s: "
                        f"{exc.message}",
                        topic=topic,
                    ) from exc
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_MAX_S)
                continue
            if described.deleting:
                raise UnknownTopicOrPartitionError(f"topic {topic!r} is being deleted", topic=topic)
            self._counts[topic] = described.partition_count
            return described.partition_count
