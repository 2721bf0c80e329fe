"""``DrainingServer`` under real signals: uvicorn in this process, SIGTERM raised at it.

The first signal runs the drain while the listener still answers, and the server stops only
once the drain returned (re-raising the signal at the end, as uvicorn does); a second signal
cuts the drain short; a drain that fails still lets the server stop.
"""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import Iterator
from types import FrameType

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from yak.web.drain import Drain, DrainingServer


async def _hello(_request: Request) -> PlainTextResponse:
    return PlainTextResponse("hello")


@pytest.fixture
def delivered() -> Iterator[list[int]]:
    """The signals that reached the process's own handler: uvicorn re-raises the one it
    stopped for once its handlers are gone, which must not end the test run."""
    seen: list[int] = []

    def record(sig: int, _frame: FrameType | None) -> None:
        seen.append(sig)

    previous = signal.signal(signal.SIGTERM, record)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGTERM, previous)


class Served:
    """A ``DrainingServer`` serving on a free port, as a task of the test's loop."""

    def __init__(self, drain: Drain) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/"
        app = Starlette(routes=[Route("/", _hello)])
        config = uvicorn.Config(app, log_level="warning", lifespan="off", ws="none")
        self.server = DrainingServer(config, drain)
        self.task = asyncio.create_task(self.server.serve(sockets=[self.listener]))

    async def started(self) -> None:
        assert await _get(self.url) == "hello"  # answered once uvicorn has started
        assert self.server.started

    async def stopped(self) -> None:
        async with asyncio.timeout(5):
            await self.task
        self.listener.close()


async def _get(url: str) -> str:
    async with httpx.AsyncClient(timeout=2) as client:
        return (await client.get(url)).text


async def test_the_listener_serves_through_the_drain_and_stops_after_it(
    delivered: list[int],
) -> None:
    began, release = asyncio.Event(), asyncio.Event()

    async def drain() -> None:
        began.set()
        await release.wait()

    served = Served(drain)
    await served.started()
    signal.raise_signal(signal.SIGTERM)
    async with asyncio.timeout(5):
        await began.wait()
    assert await _get(served.url) == "hello"  # still serving, the signal held back
    await asyncio.sleep(0.3)  # three of uvicorn's ticks: it must not stop on its own
    assert not served.task.done()
    assert await _get(served.url) == "hello"

    release.set()
    await served.stopped()
    assert delivered == [signal.SIGTERM]  # the process still ends by its signal
    with pytest.raises(httpx.ConnectError):
        await _get(served.url)


async def test_a_second_signal_cuts_the_drain_short(delivered: list[int]) -> None:
    began, cancelled = asyncio.Event(), asyncio.Event()

    async def drain() -> None:
        began.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    served = Served(drain)
    await served.started()
    signal.raise_signal(signal.SIGTERM)
    async with asyncio.timeout(5):
        await began.wait()
    signal.raise_signal(signal.SIGTERM)
    await served.stopped()
    assert cancelled.is_set()
    assert delivered == [signal.SIGTERM]


async def test_a_failed_drain_still_stops_the_server(delivered: list[int]) -> None:
    async def drain() -> None:
        raise RuntimeError("broken on purpose")

    served = Served(drain)
    await served.started()
    signal.raise_signal(signal.SIGTERM)
    await served.stopped()
    assert delivered == [signal.SIGTERM]
