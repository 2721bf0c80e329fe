"""The request-id contextvar: set and reset per request, invisible after the request ends."""

from __future__ import annotations

import asyncio

import httpx

from yak.observability.request_id import (
    MAX_LENGTH,
    begin_request,
    current_request_id,
    end_request,
    new_request_id,
    propagate_request_id,
    request_id_header,
    valid_request_id,
)


def test_outside_a_request_there_is_no_id() -> None:
    assert current_request_id() is None
    assert request_id_header() is None


def test_an_id_is_current_until_the_request_ends() -> None:
    scope, token = begin_request("abc-123")
    assert current_request_id() == "abc-123"
    assert request_id_header() == (b"x-request-id", b"abc-123")
    end_request(scope, token)
    assert current_request_id() is None


async def test_a_task_started_by_a_request_loses_the_id_when_the_request_ends() -> None:
    seen: list[str | None] = []
    go_on = asyncio.Event()

    async def background() -> None:
        seen.append(current_request_id())
        await go_on.wait()
        seen.append(current_request_id())  # e.g. a batch sender serving later requests

    scope, token = begin_request("first")
    task = asyncio.create_task(background())
    await asyncio.sleep(0)
    end_request(scope, token)
    go_on.set()
    await task
    assert seen == ["first", None]


async def test_concurrent_requests_see_their_own_ids() -> None:
    async def serve(request_id: str) -> str | None:
        scope, token = begin_request(request_id)
        try:
            await asyncio.sleep(0)
            return current_request_id()
        finally:
            end_request(scope, token)

    ids = [f"r{i}" for i in range(20)]
    assert await asyncio.gather(*(asyncio.create_task(serve(i)) for i in ids)) == ids


def test_new_ids_are_unique_hex() -> None:
    ids = {new_request_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


def test_only_short_printable_ascii_ids_are_kept() -> None:
    assert valid_request_id("req-42_ABC.x")
    assert valid_request_id("x" * MAX_LENGTH)
    assert not valid_request_id("")
    assert not valid_request_id("x" * (MAX_LENGTH + 1))
    assert not valid_request_id("line\nbreak")
    assert not valid_request_id("caf\u00e9")


async def test_the_httpx_hook_passes_the_current_id_on() -> None:
    request = httpx.Request("GET", "http://proxy/x")
    await propagate_request_id(request)
    assert "x-request-id" not in request.headers
    scope, token = begin_request("rid-7")
    try:
        await propagate_request_id(request)
        assert request.headers["x-request-id"] == "rid-7"
        own = httpx.Request("GET", "http://proxy/x", headers={"x-request-id": "mine"})
        await propagate_request_id(own)
        assert own.headers["x-request-id"] == "mine"
    finally:
        end_request(scope, token)
