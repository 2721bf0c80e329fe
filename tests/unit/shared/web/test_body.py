"""``read_body``: the whole body, 413 past the limit (declared or streamed), disconnects.

Driven in process: a starlette ``Request`` over a scripted ASGI ``receive`` that counts how
many messages were taken, so a test can tell a body refused before it was read.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from starlette.requests import ClientDisconnect, Request
from starlette.types import Message

from yak.errors import MessageTooLargeError, NetworkError
from yak.web.body import read_body


class _Client:
    """The ASGI side of one request: its headers and the messages ``receive`` hands out."""

    def __init__(self, chunks: Sequence[bytes], *, headers: dict[str, str] | None = None) -> None:
        self.messages: list[Message] = [
            {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
            for i, chunk in enumerate(chunks)
        ] or [{"type": "http.request", "body": b"", "more_body": False}]
        self.taken = 0
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
        self.request = Request({"type": "http", "method": "POST", "headers": raw}, self.receive)

    async def receive(self) -> Message:
        self.taken += 1
        return self.messages.pop(0)


async def test_the_chunks_come_back_joined() -> None:
    client = _Client([b"ab", b"", b"cd", b"e"])
    assert await read_body(client.request, 5) == b"abcde"


async def test_one_chunk_comes_back_as_it_is() -> None:
    chunk = b"x" * 65_536
    assert await read_body(_Client([chunk]).request, 65_536) is chunk


async def test_an_empty_body_is_empty() -> None:
    assert await read_body(_Client([]).request, 0) == b""


async def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    client = _Client([b"x" * 2_000], headers={"content-length": "2000"})
    with pytest.raises(MessageTooLargeError) as raised:
        await read_body(client.request, 1_024)
    assert raised.value.message == "the request body is 2,000 bytes; the limit is 1,024"
    assert raised.value.details == {"size": 2_000, "limit": 1_024}
    assert raised.value.http_status == 413
    assert client.taken == 0


@pytest.mark.parametrize("declared", [None, "10", "\xb2"], ids=["none", "understated", "odd"])
async def test_a_streamed_body_over_the_limit_is_refused_at_the_chunk_that_passes_it(
    declared: str | None,
) -> None:
    headers = {} if declared is None else {"content-length": declared}
    client = _Client([b"x" * 600, b"x" * 600, b"x" * 600], headers=headers)
    with pytest.raises(MessageTooLargeError) as raised:
        await read_body(client.request, 1_024)
    assert raised.value.message == "the request body is over the limit of 1,024 bytes"
    assert raised.value.details == {"limit": 1_024}
    assert client.taken == 2


async def test_a_body_of_exactly_the_limit_passes() -> None:
    client = _Client([b"x" * 512, b"y" * 512], headers={"content-length": "1024"})
    assert await read_body(client.request, 1_024) == b"x" * 512 + b"y" * 512


def _disconnecting() -> _Client:
    client = _Client([b"partial"])
    client.messages = [
        {"type": "http.request", "body": b"partial", "more_body": True},
        {"type": "http.disconnect"},
    ]
    return client


async def test_a_disconnect_is_starlettes_by_default() -> None:
    with pytest.raises(ClientDisconnect):
        await read_body(_disconnecting().request, 1_024)


async def test_a_disconnect_raises_the_error_the_caller_names() -> None:
    with pytest.raises(NetworkError, match="disconnected before sending its whole request"):
        await read_body(_disconnecting().request, 1_024, on_disconnect=NetworkError)
