"""The lean HTTP/1.1 client of bench-latency: responses framed by content-length or chunked
encoding, incomplete ones waited for, keep-alive requests on one connection, a pool that opens
a second connection only while the first is busy."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from loadtest.latency.lean_http import (
    LeanConnection,
    LeanPool,
    ResponseError,
    parse_response,
    request_head,
)

OK = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: 7\r\n\r\n{"a":1}'


def test_a_response_framed_by_its_length() -> None:
    assert parse_response(OK) == (200, b'{"a":1}', len(OK))
    assert parse_response(OK + b"HTTP/1.1 204") == (200, b'{"a":1}', len(OK))  # the next kept


@pytest.mark.parametrize("cut", [0, 10, len(OK) - 8, len(OK) - 1])
def test_an_incomplete_response_is_waited_for(cut: int) -> None:
    assert parse_response(OK[:cut]) is None


def test_a_chunked_response() -> None:
    chunked = (
        b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"4\r\nabcd\r\n3;ext=1\r\nefg\r\n0\r\n\r\n"
    )
    assert parse_response(chunked) == (404, b"abcdefg", len(chunked))
    assert parse_response(chunked[:-2]) is None
    assert parse_response(chunked[:60]) is None


def test_bodiless_and_unframed_responses() -> None:
    assert parse_response(b"HTTP/1.1 204 No Content\r\n\r\n") == (204, b"", 27)
    with pytest.raises(ResponseError, match="without content-length"):
        parse_response(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nbody")
    with pytest.raises(ResponseError, match="not an HTTP"):
        parse_response(b"SSH-2.0-OpenSSH\r\n\r\n")


def test_a_request_head_ends_where_the_length_goes() -> None:
    head = request_head("POST", "/t?acks=1", "h", "application/json")
    assert head == (
        b"POST /t?acks=1 HTTP/1.1\r\nhost: h\r\ncontent-type: application/json\r\ncontent-length: "
    )
    assert b"content-type" not in request_head("GET", "/", "h")


async def _server(requests: list[bytes], delay_s: float = 0.0) -> AsyncIterator[str]:
    """An HTTP server answering each request (read up to its end of head, bodies of length 2)
    with ``OK`` in two writes, after ``delay_s``; its handlers awaited once the client left."""
    handlers: list[asyncio.Task[None]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.append(asyncio.current_task())  # type: ignore[arg-type]
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                requests.append(head + await reader.readexactly(2))
                await asyncio.sleep(delay_s)
                writer.write(OK[:20])
                await writer.drain()
                writer.write(OK[20:])
        except asyncio.IncompleteReadError:
            pass  # the client closed the connection
        finally:
            writer.close()
            await writer.wait_closed()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()
        await asyncio.gather(*handlers)


async def test_requests_share_one_keep_alive_connection() -> None:
    requests: list[bytes] = []
    async for url in _server(requests):
        pool = LeanPool(url)
        head = pool.head("POST", "/x", "application/json")
        for _ in range(3):
            assert await pool.request(head, b"{}") == (200, b'{"a":1}')
        assert len(pool._all) == 1
        pool.close()
    assert requests[0].startswith(b"POST /x HTTP/1.1\r\nhost: 127.0.0.1\r\n")
    assert requests[0].endswith(b"content-length: 2\r\n\r\n{}")
    assert len(requests) == 3


async def test_the_pool_opens_a_connection_per_request_in_flight() -> None:
    requests: list[bytes] = []
    async for url in _server(requests, delay_s=0.05):
        pool = LeanPool(url)
        head = pool.head("POST", "/x")
        answers = await asyncio.gather(*(pool.request(head, b"{}") for _ in range(3)))
        assert answers == [(200, b'{"a":1}')] * 3
        assert len(pool._all) == 3
        await pool.request(head, b"{}")
        assert len(pool._all) == 3  # an idle one was used again
        pool.close()


async def test_a_lost_connection_fails_the_request() -> None:
    async def hang_up(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    connection = await LeanConnection.open("127.0.0.1", port)
    with pytest.raises(ResponseError):
        await connection.request(request_head("GET", "/", "h"))
    connection.close()
    server.close()
    await server.wait_closed()
