"""``HeaderTimeoutProtocol`` under a real uvicorn server, driven by raw sockets.

A client that trickles its headers a byte at a time gets 408 and a closed connection once the
timeout passes; one that connects and sends nothing is closed; a slow *body* and a long answer
are not its business; a kept-alive connection's next request gets a fresh deadline.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from yak.web.header_timeout import HeaderTimeoutProtocol, with_header_timeout
from yak.web.serve import header_timeout_s

TIMEOUT_S = 0.5


async def _echo(request: Request) -> PlainTextResponse:
    body = await request.body()
    if request.query_params.get("wait"):
        await asyncio.sleep(float(request.query_params["wait"]))  # a slow handler, on purpose
    return PlainTextResponse(f"{len(body)}")


@pytest.fixture
async def port() -> AsyncIterator[int]:
    app = Starlette(routes=[Route("/", _echo, methods=["GET", "POST"])])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    protocol = with_header_timeout(HeaderTimeoutProtocol, TIMEOUT_S)
    config = uvicorn.Config(app, log_level="warning", lifespan="off", http=protocol)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    try:  # the listener queues connections until the server accepts them
        yield listener.getsockname()[1]
    finally:
        server.should_exit = True
        await serving
        listener.close()


async def _read_all(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.read(), 5)  # until the server closes


async def test_headers_trickled_a_byte_at_a_time_get_408(port: int) -> None:
    started = time.monotonic()  # before the connect: the server's clock starts at its accept
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = b"GET / HTTP/1.1\r\nhost: x\r\nx-slow: " + b"a" * 100

    async def trickle() -> None:
        for byte in request:
            if writer.is_closing():
                return
            writer.write(bytes([byte]))
            await asyncio.sleep(0.1)

    sending = asyncio.create_task(trickle())
    answer = await _read_all(reader)
    elapsed = time.monotonic() - started
    sending.cancel()
    writer.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"connection: close" in answer
    assert TIMEOUT_S <= elapsed < TIMEOUT_S + 1.5


async def test_a_silent_connection_is_closed(port: int) -> None:
    started = time.monotonic()  # before the connect, as above
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    assert await _read_all(reader) == b""
    writer.close()
    assert TIMEOUT_S <= time.monotonic() - started < TIMEOUT_S + 1.5


async def test_slow_bodies_and_slow_answers_are_not_cut(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /?wait=0.8 HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\n\r\nab")
    await asyncio.sleep(TIMEOUT_S + 0.2)  # the body stalls past the header timeout
    writer.write(b"cd")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 200"), head
    assert await asyncio.wait_for(reader.readexactly(1), 5) == b"4"
    # The same connection, kept alive: the next request's headers get a fresh deadline.
    await asyncio.sleep(TIMEOUT_S / 2)
    writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n")
    await asyncio.sleep(TIMEOUT_S * 0.8)
    writer.write(b"\r\n")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 200"), head
    writer.close()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        assert (await client.get("/")).text == "0"


def test_the_timeout_comes_from_the_environment() -> None:
    assert header_timeout_s({}) == 10.0
    assert header_timeout_s({"YAK_REQUEST_HEADER_TIMEOUT_MS": "2500"}) == 2.5
    with pytest.raises(ValueError, match="at least 1"):
        header_timeout_s({"YAK_REQUEST_HEADER_TIMEOUT_MS": "0"})
    assert with_header_timeout(HeaderTimeoutProtocol, 3).header_timeout_s == 3
