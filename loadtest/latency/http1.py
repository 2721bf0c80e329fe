"""A lean HTTP/1.1 client for the idle rows: one persistent connection, one request at a time,
responses parsed by ``httptools`` (llhttp, in C) — the shape of ``redis-py`` with ``hiredis``
that the Redis rows use, where ``httpx`` spends more in its own Python than a one-record produce
spends in the proxy. ``idle_proxy`` measures with both, so the client's share stays visible.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit

import httptools

__all__ = ["Http1"]


class Http1:
    """``async with Http1(url) as http: status, body = await http.request("POST", path, b"")``."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"an http:// URL with a host is needed, not {url!r}")
        self._host = parts.hostname
        self._port = parts.port or 80
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._status = 0
        self._body: list[bytes] = []
        self._done = False

    async def __aenter__(self) -> Self:
        self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._writer is not None:
            self._writer.close()
            await self._writer.wait_closed()

    # httptools callbacks
    def on_body(self, data: bytes) -> None:
        self._body.append(data)

    def on_message_complete(self) -> None:
        self._done = True

    async def request(
        self, method: str, target: str, body: bytes = b"", content_type: str = "application/json"
    ) -> tuple[int, bytes]:
        """Send one request and read its whole answer: the status and the body."""
        reader, writer = self._reader, self._writer
        if reader is None or writer is None:
            raise RuntimeError("use Http1 as an async context manager")
        head = (
            f"{method} {target} HTTP/1.1\r\nhost: {self._host}\r\n"
            f"content-type: {content_type}\r\ncontent-length: {len(body)}\r\n\r\n"
        )
        writer.write(head.encode() + body)
        parser = httptools.HttpResponseParser(self)
        self._body, self._done = [], False
        while not self._done:
            data = await reader.read(65536)
            if not data:
                raise ConnectionError("the server closed the connection")
            parser.feed_data(data)
        return parser.get_status_code(), b"".join(self._body)
