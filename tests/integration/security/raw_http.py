"""HTTP/1.1 over a raw socket: request targets exactly as given (``..``, ``%2e%2e``, a lone
``%00``), which HTTP clients would normalise away; one connection per request."""

from __future__ import annotations

import asyncio
from typing import NamedTuple
from urllib.parse import urlsplit


class Answer(NamedTuple):
    status: int
    headers: dict[str, str]
    body: bytes


async def request(
    base_url: str,
    method: str,
    target: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    timeout_s: float = 30.0,
    expect_continue: bool = False,
) -> Answer:
    """Send one request with the request-target ``target`` as is; read the whole answer.

    ``expect_continue`` sends ``Expect: 100-continue`` and the body only after the server's
    ``100 Continue``: a server that refuses the request from its headers (413 for a
    ``content-length`` over its limit) answers without reading the body, and closes.
    """
    url = urlsplit(base_url)
    assert url.hostname is not None
    assert url.port is not None
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    try:
        lines = [f"{method} {target} HTTP/1.1", f"host: {url.netloc}", "connection: close"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        if body or method in ("POST", "PUT", "PATCH"):
            lines.append(f"content-length: {len(body)}")
        if expect_continue:
            lines.append("expect: 100-continue")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("ascii"))
        if expect_continue:
            first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout_s)
            if not first.startswith(b"HTTP/1.1 100"):
                raw = first + await asyncio.wait_for(reader.read(), timeout_s)
                return _parse(raw)
        writer.write(body)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), timeout_s)  # until the server closes
    finally:
        writer.close()
    return _parse(raw)


def _parse(raw: bytes) -> Answer:
    head, _, rest = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    parsed = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        parsed[name.strip().lower()] = value.strip()
    if parsed.get("transfer-encoding") == "chunked":
        rest = _unchunk(rest)
    return Answer(int(status_line.split(" ")[1]), parsed, rest)


def _unchunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += data[:size]
        data = data[size + 2 :]
    return bytes(out)
