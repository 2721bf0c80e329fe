"""The proxy's registry client: the caller's credential goes to the registry (under security
the registry authorizes the end user, as the coordinator does); no caller, no credential."""

from __future__ import annotations

import asyncio
import contextvars

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from yak_rest_proxy.schemas.registry_client import RegistryClient
from yak_rest_proxy.security.forwarded_credential import ForwardCredential, ForwardedAuth


async def test_the_callers_credential_reaches_the_registry() -> None:
    seen: list[str | None] = []

    def registry(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json={"schema": '"string"'})

    client = RegistryClient(
        "http://registry", transport=httpx.MockTransport(registry), auth=ForwardedAuth()
    )

    async def produce(_request: Request) -> JSONResponse:
        return JSONResponse({"id": (await client.by_id(7)).schema_id})

    proxy = ForwardCredential(Starlette(routes=[Route("/produce", produce)]))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=proxy), base_url="http://proxy"
    ) as caller:
        answer = await caller.get("/produce", headers={"authorization": "Basic YWxpY2U6cHc="})
        assert answer.json() == {"id": 7}
    # Outside any caller's request (a task of its own, as uvicorn runs each request; the
    # ASGI transport above ran the app in this test's own context).
    await asyncio.create_task(client.by_id(8), context=contextvars.Context())
    await client.aclose()
    assert seen == ["Basic YWxpY2U6cHc=", None]
