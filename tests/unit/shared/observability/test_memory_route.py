"""/debug/memory: off unless YAK_TRACEMALLOC asks; when on, the sites that grew are named."""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI

from yak.observability.memory import memory_router, resident_kib, start_from_env


@pytest.fixture
def tracing() -> Iterator[None]:
    was = tracemalloc.is_tracing()
    yield
    if not was:
        tracemalloc.stop()


def test_unset_or_empty_leaves_tracing_off() -> None:
    if tracemalloc.is_tracing():
        pytest.skip("the test run itself traces allocations")
    assert not start_from_env({})
    assert not start_from_env({"YAK_TRACEMALLOC": " "})
    assert not tracemalloc.is_tracing()


@pytest.mark.parametrize("value", ["yes", "0", "26"])
def test_a_bad_frame_count_is_refused_with_the_variable_named(value: str) -> None:
    with pytest.raises(ValueError, match="YAK_TRACEMALLOC must be a frame count from 1 to 25"):
        start_from_env({"YAK_TRACEMALLOC": value})


def _client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def test_the_route_names_the_site_that_grew(tracing: None) -> None:
    assert start_from_env({"YAK_TRACEMALLOC": "2"})
    app = FastAPI()
    app.include_router(memory_router())
    held: list[bytes] = []
    async with _client(app) as client:
        first = (await client.get("/debug/memory", params={"top": 5})).json()
        assert first["traced_bytes"] > 0
        assert "grown_since_last_call" not in first
        line = sys._getframe().f_lineno + 1
        held.extend(bytes(1000) + bytes([i % 256]) for i in range(2000))  # ~2 MB from one line
        second = (await client.get("/debug/memory", params={"top": 5})).json()
    top = second["grown_since_last_call"][0]
    assert top["where"].endswith(f"test_memory_route.py:{line}"), top
    assert top["size_diff"] > 1_900_000
    assert second["resident_kib"]["VmRSS"] > 0
    assert len(held) == 2000


async def test_off_answers_409(tracing: None) -> None:
    if tracemalloc.is_tracing():
        tracemalloc.stop()
    app = FastAPI()
    app.include_router(memory_router())
    async with _client(app) as client:
        answer = await client.get("/debug/memory")
    assert answer.status_code == 409
    assert "YAK_TRACEMALLOC=1" in answer.json()["error"]


def test_resident_split_is_read_from_status() -> None:
    status = (
        "Name:\tx\nVmRSS:\t  2048 kB\nRssAnon:\t  1536 kB\nRssFile:\t 512 kB\nRssShmem:\t0 kB\n"
    )
    assert resident_kib(status) == {"VmRSS": 2048, "RssAnon": 1536, "RssFile": 512, "RssShmem": 0}
