"""``yak.web.direct`` under a real uvicorn server, driven by raw sockets: a direct route answers
its requests in one write with uvicorn's default headers, declines the rest to the ASGI app,
keeps pipelined answers in order, reads a body that arrives late, honours ``Connection:
close``, and a handler that fails is answered 500 as uvicorn answers an app. ``respond`` on a
recorded cycle: one write, uvicorn's bookkeeping, nothing to a client gone."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from yak.web.direct import Cycle, DirectHandler, DirectRoutesProtocol, respond, with_direct_routes
from yak.web.header_timeout import with_header_timeout

served_by: list[str] = []


async def _asgi(scope: Scope, receive: Receive, send: Send) -> None:
    """The app behind: echoes the path, after a pause for ``/slow``."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body", False):
        pass
    served_by.append("asgi")
    if scope["path"] == "/slow":
        await asyncio.sleep(0.05)
    body = f"asgi {scope['path']}".encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _echo(cycle: Cycle) -> None:
    body = b""
    while True:
        message = await cycle.receive()
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break
    served_by.append("direct")
    answer = f"direct {cycle.scope['path']} {len(body)}".encode()
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(answer)).encode())]
    await respond(cycle, 200, headers, answer)


async def _fails(cycle: Cycle) -> None:
    raise RuntimeError("the handler broke")


async def _silent(cycle: Cycle) -> None:
    return None


def _route(scope: Scope) -> DirectHandler | None:
    path = scope["path"]
    if path.startswith("/direct"):
        return _echo
    return {"/fails": _fails, "/silent": _silent}.get(path)


@pytest.fixture
async def port() -> AsyncIterator[int]:
    served_by.clear()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    protocol = with_direct_routes(with_header_timeout(DirectRoutesProtocol, 5.0), _route)
    config = uvicorn.Config(_asgi, log_level="warning", lifespan="off", http=protocol)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        yield listener.getsockname()[1]
    finally:
        server.should_exit = True
        await serving
        listener.close()


async def _answers(reader: asyncio.StreamReader, count: int) -> list[tuple[bytes, bytes]]:
    """``count`` answers (head, body) read off the connection."""
    answers = []
    for _ in range(count):
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        answers.append((head, await asyncio.wait_for(reader.readexactly(length), 5)))
    return answers


def _request(path: str, body: bytes = b"", *extra: bytes) -> bytes:
    head = [f"POST {path} HTTP/1.1".encode(), b"host: x", f"content-length: {len(body)}".encode()]
    return b"\r\n".join([*head, *extra, b"", b""]) + body


async def test_a_direct_route_answers_with_uvicorns_default_headers(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_request("/direct/a", b"12345"))
    [(head, body)] = await _answers(reader, 1)
    writer.close()
    lines = head.split(b"\r\n")
    assert lines[0] == b"HTTP/1.1 200 OK"
    names = [line.split(b":", 1)[0] for line in lines[1:] if line]
    assert names == [b"date", b"server", b"content-type", b"content-length"]
    assert body == b"direct /direct/a 5"
    assert served_by == ["direct"]


async def test_other_requests_go_to_the_asgi_app(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_request("/elsewhere"))
    [(_, body)] = await _answers(reader, 1)
    writer.close()
    assert body == b"asgi /elsewhere"
    assert served_by == ["asgi"]


async def test_pipelined_answers_keep_the_requests_order(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        _request("/direct/1", b"a") + _request("/slow") + _request("/direct/2", b"bb")
    )  # one segment: three requests, the middle one slow and not direct
    answers = await _answers(reader, 3)
    writer.close()
    assert [body for _, body in answers] == [
        b"direct /direct/1 1",
        b"asgi /slow",
        b"direct /direct/2 2",
    ]
    assert served_by == ["direct", "asgi", "direct"]


async def test_a_kept_alive_connection_serves_the_next_request_and_close_is_honoured(
    port: int,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for index in range(3):
        writer.write(_request(f"/direct/{index}", b"x" * index))
        [(head, body)] = await _answers(reader, 1)
        assert body == f"direct /direct/{index} {index}".encode()
        assert b"connection: close" not in head
    writer.write(_request("/direct/last", b"", b"connection: close"))
    [(head, body)] = await _answers(reader, 1)
    assert b"connection: close" in head
    assert body == b"direct /direct/last 0"
    assert await asyncio.wait_for(reader.read(), 5) == b""  # the server closed it
    writer.close()


async def test_a_body_that_arrives_after_its_headers_is_read_whole(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = b"y" * 3000
    request = _request("/direct/late", body)
    writer.write(request[: -len(body)])  # the headers alone
    await writer.drain()
    await asyncio.sleep(0.1)
    writer.write(body[:1000])
    await writer.drain()
    await asyncio.sleep(0.05)
    writer.write(body[1000:])
    [(_, answer)] = await _answers(reader, 1)
    writer.close()
    assert answer == b"direct /direct/late 3000"


@pytest.mark.parametrize("path", ["/fails", "/silent"])
async def test_a_handler_that_fails_or_answers_nothing_gets_500(
    port: int, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    with caplog.at_level(logging.ERROR):
        writer.write(_request(path))
        [(head, body)] = await _answers(reader, 1)
    writer.close()
    assert head.startswith(b"HTTP/1.1 500 ")
    assert body == b"Internal Server Error"
    assert any("direct route" in record.getMessage() for record in caplog.records)


# --- respond, on a recorded cycle ----------------------------------------------------------


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True


class _Flow:
    def __init__(self, paused: bool) -> None:
        self.write_paused = paused
        self.drained = 0

    async def drain(self) -> None:
        self.drained += 1
        self.write_paused = False


class _Cycle:
    def __init__(self, *, keep_alive: bool = True, disconnected: bool = False) -> None:
        self.scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/"}
        self.transport = _Transport()
        self.flow = _Flow(paused=False)
        self.default_headers = [(b"server", b"test")]
        self.message_event = asyncio.Event()
        self.keep_alive = keep_alive
        self.disconnected = disconnected
        self.more_body = False
        self.response_started = False
        self.response_complete = False
        self.waiting_for_100_continue = True
        self.responses = 0
        self.on_response = self._responded

    def _responded(self) -> None:
        self.responses += 1

    async def receive(self) -> Any:
        raise AssertionError("not read here")

    async def send(self, message: Any) -> None:
        raise AssertionError("not sent here")

    async def send_500_response(self) -> None:
        raise AssertionError("no 500 here")


async def test_respond_writes_once_and_does_uvicorns_bookkeeping() -> None:
    cycle = _Cycle()
    cycle.flow.write_paused = True  # the client reads slowly: wait for the buffer to drain
    await respond(cycle, 201, [(b"content-length", b"2")], memoryview(b"ok"))
    assert cycle.flow.drained == 1
    assert cycle.transport.writes == [
        b"HTTP/1.1 201 Created\r\nserver: test\r\ncontent-length: 2\r\n\r\nok"
    ]
    assert cycle.response_started
    assert cycle.response_complete
    assert not cycle.waiting_for_100_continue
    assert cycle.message_event.is_set()  # a receive() waiting for a disconnect wakes
    assert cycle.responses == 1  # the next pipelined request starts
    assert not cycle.transport.closed


async def test_respond_closes_a_connection_not_kept_alive() -> None:
    cycle = _Cycle(keep_alive=False)
    await respond(cycle, 200, [(b"content-length", b"0")], b"")
    [written] = cycle.transport.writes
    assert written.endswith(b"content-length: 0\r\nconnection: close\r\n\r\n")
    assert cycle.transport.closed
    assert cycle.responses == 1


async def test_respond_writes_nothing_to_a_client_gone() -> None:
    cycle = _Cycle(disconnected=True)
    await respond(cycle, 200, [(b"content-length", b"2")], b"ok")
    assert cycle.transport.writes == []
    assert not cycle.response_started
    assert cycle.responses == 0
