"""``ProxyClusterLoad``: the leaders and the brokers' load samples the SDK's ``load_aware``
partitioner reads (``yak.partitioner.ClusterLoad``), from the proxy's metadata API.

The partitioner asks once per batch and must not wait, so answers come from a cache: the
leaders of each topic written to (``GET /api/v1/topics/{t}``) and every broker's latest sample
(``GET /api/v1/brokers``, ``BrokerInfo.load``). The cache is refreshed in the background at
most every ``refresh_ms`` (default 5 s, the brokers' default publish interval) when the
partitioner asks, and at once for a topic not seen yet. Until the first answer a topic's
leaders are unknown and the partitioner draws uniformly; a failed refresh keeps what was
known (the samples then age into staleness, and stale ones count as average). One event
loop, the producer's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence

from pydantic import RootModel

from yak.api.admin import BrokerInfo, TopicDescription
from yak.clients._http import segment
from yak.errors import YakError
from yak.partitioner import NO_LEADER, LoadSample
from yak.sdk._client import ApiClient

__all__ = ["ProxyClusterLoad"]

_log = logging.getLogger(__name__)


class _BrokerList(RootModel[list[BrokerInfo]]):
    pass


class ProxyClusterLoad:
    """Cached leaders and load samples, refreshed in the background (see the module doc)."""

    def __init__(self, api: ApiClient, refresh_ms: int = 5_000) -> None:
        self._api = api
        self._refresh_s = refresh_ms / 1000
        self._leaders: dict[str, list[int]] = {}
        self._loads: dict[int, LoadSample | None] = {}
        self._wanted: set[str] = set()
        self._refreshed_at = float("-inf")
        self._task: asyncio.Task[None] | None = None
        #: Refreshes completed (for tests and tools).
        self.refreshes = 0

    def leaders(self, topic: str, num_partitions: int) -> Sequence[int]:
        if topic not in self._wanted:
            self._wanted.add(topic)
            self._refresh_soon(now=True)
        else:
            self._refresh_soon()
        return self._leaders.get(topic, [NO_LEADER] * num_partitions)

    def loads(self) -> Mapping[int, LoadSample | None]:
        return self._loads

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def refresh(self) -> None:
        """Read the brokers' samples and the wanted topics' leaders now."""
        try:
            brokers = (await self._api.call("GET", "/brokers", _BrokerList)).root
            self._loads = {b.broker_id: b.load for b in brokers}
            for topic in sorted(self._wanted):
                described = await self._api.call(
                    "GET", f"/topics/{segment(topic)}", TopicDescription
                )
                leaders = [NO_LEADER] * described.partition_count
                for partition in described.partitions:
                    if partition.partition < len(leaders):
                        leaders[partition.partition] = partition.leader
                self._leaders[topic] = leaders
        except YakError as exc:  # keep what was known: stale samples count as average
            _log.debug("refreshing the cluster's load failed: %s", exc)
        finally:
            self._refreshed_at = time.monotonic()
        self.refreshes += 1

    def _refresh_soon(self, *, now: bool = False) -> None:
        if self._task is not None and not self._task.done():
            return
        if not now and time.monotonic() - self._refreshed_at < self._refresh_s:
            return
        self._task = asyncio.get_running_loop().create_task(self.refresh())

    async def settled(self) -> None:
        """Wait for the refresh in flight, if any (tests, tools)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
