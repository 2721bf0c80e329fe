"""The SDK's readers honour 429 ``Retry-After`` within a budget (a fake transport)."""

from __future__ import annotations

import time

import httpx
import orjson
import pytest

from yak.errors import ThrottlingQuotaExceededError
from yak.sdk import AsyncPartitionReader
from yak.sdk._client import throttle_ms


def _throttled(retry_after_ms: int) -> httpx.Response:
    body = {
        "code": "THROTTLING_QUOTA_EXCEEDED",
        "message": "over the fetch quota",
        "details": {"retry_after_s": 1, "retry_after_ms": retry_after_ms},
    }
    return httpx.Response(429, content=orjson.dumps(body), headers={"retry-after": "1"})


def _records() -> httpx.Response:
    body = {
        "topic": "t",
        "partition": 0,
        "records": [],
        "next_offset": 0,
        "high_watermark": 0,
        "log_start_offset": 0,
    }
    return httpx.Response(200, content=orjson.dumps(body))


class Proxy:
    """Answers ``throttled`` 429s, then records."""

    def __init__(self, throttled: int, retry_after_ms: int = 100) -> None:
        self.throttled = throttled
        self.retry_after_ms = retry_after_ms
        self.calls: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(time.monotonic())
        if len(self.calls) <= self.throttled:
            return _throttled(self.retry_after_ms)
        return _records()


async def test_a_throttled_read_waits_as_told_and_reads() -> None:
    proxy = Proxy(throttled=2)
    transport = httpx.MockTransport(proxy)
    async with AsyncPartitionReader("http://proxy", transport=transport) as reader:
        read = await reader.read("t", 0, 0)
    assert read.records == []
    assert len(proxy.calls) == 3
    gaps = [b - a for a, b in zip(proxy.calls, proxy.calls[1:], strict=False)]
    assert all(gap >= 0.09 for gap in gaps), gaps


async def test_past_its_budget_the_throttling_error_is_raised() -> None:
    proxy = Proxy(throttled=10, retry_after_ms=200)
    transport = httpx.MockTransport(proxy)
    reader = AsyncPartitionReader("http://proxy", transport=transport, max_throttle_ms=500)
    async with reader:
        with pytest.raises(ThrottlingQuotaExceededError) as raised:
            await reader.read("t", 0, 0)
    assert raised.value.retriable
    assert throttle_ms(raised.value) == 200
    assert len(proxy.calls) == 3  # waits of 200 ms fit twice in 500 ms
    no_wait = AsyncPartitionReader(
        "http://proxy", transport=httpx.MockTransport(Proxy(throttled=1)), max_throttle_ms=0
    )
    async with no_wait:
        with pytest.raises(ThrottlingQuotaExceededError):
            await no_wait.read("t", 0, 0)
