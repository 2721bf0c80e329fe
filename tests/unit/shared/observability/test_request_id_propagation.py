"""Outgoing calls of the typed clients carry the request id of the request being served."""

from __future__ import annotations

import httpx
import pytest

from yak.clients.admin import AdminClient
from yak.clients.broker import BrokerClient
from yak.errors import YakError
from yak.observability.request_id import begin_request, end_request
from yak.protocol.broker_wire import FetchRequest
from yak.sdk import AsyncAdmin


def _recording(seen: list[str | None], body: bytes = b"{}") -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("x-request-id"))
        return httpx.Response(500, content=body)

    return httpx.MockTransport(handler)


async def test_the_broker_and_admin_clients_pass_the_id_on() -> None:
    seen: list[str | None] = []
    broker = BrokerClient("http://broker", transport=_recording(seen), cluster_secret="")
    admin = AdminClient("http://coordinator", transport=_recording(seen), cluster_secret="")

    async def call_both() -> None:
        with pytest.raises(YakError):
            await broker.fetch(FetchRequest((), max_wait_ms=0))
        with pytest.raises(YakError):
            await admin.cluster()

    async with broker, admin:
        await call_both()
        scope, token = begin_request("rid-42")
        try:
            await call_both()
        finally:
            end_request(scope, token)
        await call_both()
    assert seen == [None, None, "rid-42", "rid-42", None, None]


async def test_the_sdk_passes_the_id_on_from_inside_a_service() -> None:
    seen: list[str | None] = []
    admin = AsyncAdmin("http://proxy", transport=_recording(seen))
    scope, token = begin_request("console-7")
    try:
        with pytest.raises(YakError):
            await admin.cluster()
    finally:
        end_request(scope, token)
    await admin.aclose()
    assert seen == ["console-7"]
