"""A lean HTTP/1.1 client for the end-to-end and back-to-back rows: an ``asyncio.Protocol`` on a
keep-alive connection, request heads built once, the response parsed just enough (the status,
``content-length`` or chunked framing, the body) — about what ``redis-py`` with ``hiredis``
pays on the Redis rows, where ``httpx`` spends ~1 ms of Python per request (issue 34). It is
loadtest code, not a product client: no redirects, no TLS, no proxies, one request at a time
per connection; ``LeanPool`` opens more connections for requests in flight together.

- ``parse_response(buffer)``: pure — ``(status, body, bytes used)`` of the first whole
  response in ``buffer``, None while it is incomplete;
- ``LeanConnection``: one connection; ``request(head, body)`` sends ``head`` (made by
  ``request_head``, which ends with ``content-length: ``) with the body's length and the body;
- ``LeanPool``: idle connections to one server, a new one when all are busy.

Single event loop; a connection is used by one request at a time (the pool sees to it).
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

__all__ = ["LeanConnection", "LeanPool", "ResponseError", "parse_response", "request_head"]

_END_OF_HEAD = b"\r\n\r\n"


class ResponseError(ConnectionError):
    """A response this client cannot frame, or a connection lost before its end."""


def request_head(method: str, target: str, host: str, content_type: str | None = None) -> bytes:
    """A request's head up to the body's length: append ``b"%d\\r\\n\\r\\n" % len(body)``."""
    typed = f"content-type: {content_type}\r\n" if content_type else ""
    return f"{method} {target} HTTP/1.1\r\nhost: {host}\r\n{typed}content-length: ".encode()


def _header(head: bytes, name: bytes) -> bytes | None:
    at = head.lower().find(b"\r\n" + name + b":")
    if at < 0:
        return None
    start = at + len(name) + 3
    end = head.find(b"\r\n", start)
    return head[start : end if end >= 0 else len(head)].strip()


def _chunked(buffer: bytes | bytearray, start: int) -> tuple[bytes, int] | None:
    parts: list[bytes] = []
    at = start
    while True:
        line_end = buffer.find(b"\r\n", at)
        if line_end < 0:
            return None
        size = int(bytes(buffer[at:line_end]).split(b";")[0], 16)
        at = line_end + 2
        if size == 0:
            trailer_end = buffer.find(b"\r\n", at)  # no trailers expected: one empty line
            return (b"".join(parts), trailer_end + 2) if trailer_end >= 0 else None
        if len(buffer) < at + size + 2:
            return None
        parts.append(bytes(buffer[at : at + size]))
        at += size + 2


def parse_response(buffer: bytes | bytearray) -> tuple[int, bytes, int] | None:
    """The first whole response in ``buffer``: its status, its body and the bytes it took;
    None while incomplete. ResponseError for a response framed by neither ``content-length``
    nor chunked encoding (a status other than 1xx, 204 and 304)."""
    head_end = buffer.find(_END_OF_HEAD)
    if head_end < 0:
        return None
    head = bytes(buffer[:head_end])
    if not head.startswith(b"HTTP/1.") or len(head) < 12:
        raise ResponseError(f"not an HTTP/1.x response: {head[:40]!r}")
    status = int(head[9:12])
    body_start = head_end + 4
    length = _header(head, b"content-length")
    if length is not None:
        end = body_start + int(length)
        return (status, bytes(buffer[body_start:end]), end) if len(buffer) >= end else None
    if (_header(head, b"transfer-encoding") or b"").lower() == b"chunked":
        chunked = _chunked(buffer, body_start)
        return None if chunked is None else (status, chunked[0], chunked[1])
    if status in (204, 304) or 100 <= status < 200:
        return status, b"", body_start
    raise ResponseError(f"a {status} response without content-length or chunked encoding")


class LeanConnection(asyncio.Protocol):
    """One keep-alive connection, one request at a time (see the module docstring)."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.closed = False

    @classmethod
    async def open(cls, host: str, port: int) -> LeanConnection:
        loop = asyncio.get_running_loop()
        _, protocol = await loop.create_connection(cls, host, port)
        return protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        try:
            parsed = parse_response(self._buffer)
        except (ResponseError, ValueError) as exc:
            waiter.set_exception(ResponseError(str(exc)))
            return
        if parsed is not None:
            status, body, used = parsed
            del self._buffer[:used]
            waiter.set_result((status, body))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(ResponseError(f"the connection was lost: {exc!r}"))

    async def request(self, head: bytes, body: bytes = b"") -> tuple[int, bytes]:
        """Send ``head`` (``request_head``), the body's length and ``body``; the status and
        body of the answer."""
        transport = self._transport
        if transport is None or self.closed:
            raise ResponseError("the connection is closed")
        self._waiter = asyncio.get_running_loop().create_future()
        transport.write(b"%s%d\r\n\r\n%s" % (head, len(body), body))
        try:
            return await self._waiter
        finally:
            self._waiter = None

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


class LeanPool:
    """Connections to the server of ``url``: an idle one for each request, a new one when
    every connection is busy."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"an http:// URL with a host is needed, not {url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self._idle: list[LeanConnection] = []
        self._all: list[LeanConnection] = []

    def head(self, method: str, target: str, content_type: str | None = None) -> bytes:
        return request_head(method, target, self.host, content_type)

    async def request(self, head: bytes, body: bytes = b"") -> tuple[int, bytes]:
        connection = self._idle.pop() if self._idle else None
        if connection is None or connection.closed:
            connection = await LeanConnection.open(self.host, self.port)
            self._all.append(connection)
        answer = await connection.request(head, body)
        self._idle.append(connection)
        return answer

    def close(self) -> None:
        for connection in self._all:
            connection.close()
        self._all.clear()
        self._idle.clear()
