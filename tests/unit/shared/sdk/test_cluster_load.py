"""The SDK's ``load_aware`` partitioner: leaders and load samples from the proxy's metadata API,
cached and refreshed in the background (``yak.sdk.cluster_load``)."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import httpx
import pytest

from tests.unit.shared.sdk.fake_proxy import FakeProxy
from yak.errors import InvalidConfigError
from yak.partitioner import NO_LEADER
from yak.sdk import AsyncProducer
from yak.sdk._client import ApiClient
from yak.sdk.cluster_load import ProxyClusterLoad

URL = "http://proxy.test"


def broker(broker_id: int, cpu: float, rate: float) -> dict[str, Any]:
    return {
        "broker_id": broker_id,
        "host": "127.0.0.1",
        "port": 9000 + broker_id,
        "load": {
            "cpu": cpu,
            "memory_bytes": 100 << 20,
            "disk_used_ratio": 0.5,
            "records_per_second": rate,
            "sampled_at_ms": time.time_ns() // 1_000_000,
            "publish_interval_ms": 5_000,
        },
    }


class LoadedProxy:
    """The fake proxy, with brokers 0-2 (broker 0 loaded) leading topic ``t`` in turn."""

    def __init__(self, partitions: int = 6) -> None:
        self.proxy = FakeProxy(partitions={"t": partitions})
        self.partitions = partitions
        self.broken = False
        self.metadata_calls = 0

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path in ("/api/v1/brokers", "/api/v1/topics/t") and request.method == "GET":
            self.metadata_calls += 1
            if self.broken:
                return httpx.Response(503, json={"error_code": 50301, "message": "down"})
        if path == "/api/v1/brokers":
            return httpx.Response(
                200,
                json=[broker(0, 1.8, 9_000.0), broker(1, 0.2, 500.0), broker(2, 0.2, 500.0)],
            )
        if path == "/api/v1/topics/t" and request.method == "GET":
            answer = self.proxy.handle(request)
            described = answer.json()
            for partition in described["partitions"]:
                partition["leader"] = partition["partition"] % 3
            return httpx.Response(200, json=described)
        return self.proxy.handle(request)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)


async def test_the_cache_reads_leaders_and_loads_then_keeps_them_when_a_refresh_fails() -> None:
    proxy = LoadedProxy()
    api = ApiClient(URL, timeout_s=5, transport=proxy.transport())
    view = ProxyClusterLoad(api, refresh_ms=60_000)
    assert list(view.leaders("t", 6)) == [NO_LEADER] * 6  # unknown: the partitioner draws evenly
    await view.settled()  # the refresh a new topic starts at once
    assert view.refreshes == 1
    assert list(view.leaders("t", 6)) == [0, 1, 2, 0, 1, 2]
    loads = view.loads()
    assert loads[0] is not None
    assert loads[0].cpu == 1.8
    for _ in range(100):  # asked per batch: no request while the cache is fresh
        view.leaders("t", 6)
    await view.settled()
    assert proxy.metadata_calls == 2
    proxy.broken = True
    await view.refresh()
    assert list(view.leaders("t", 6)) == [0, 1, 2, 0, 1, 2]
    assert view.loads()[0] is not None
    await view.aclose()
    await api.aclose()


async def test_a_load_aware_producer_steers_keyless_records_away_from_the_loaded_leader() -> None:
    proxy = LoadedProxy()
    async with AsyncProducer(
        URL,
        transport=proxy.transport(),
        partitioner="load_aware",
        batch_max_bytes=1,  # a batch per record: each record draws
        linger_ms=0,
        retry_backoff_ms=1,
    ) as producer:
        await producer.send_and_wait("t", b"first")  # the metadata arrives meanwhile
        futures = [await producer.send("t", b"x") for _ in range(600)]
        placed = [(await future).partition for future in futures]
    led = Counter(partition % 3 for partition in placed)
    assert led[0] < 90  # round robin: 200
    assert led[1] > 200
    assert led[2] > 200


def test_an_unknown_partitioner_is_refused() -> None:
    with pytest.raises(InvalidConfigError, match="partitioner must be one of"):
        AsyncProducer(URL, partitioner="busiest")  # type: ignore[arg-type]
