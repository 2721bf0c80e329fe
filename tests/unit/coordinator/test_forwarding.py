"""Admin bodies are bounded, and a standby's forwarding keeps the path as sent (a fake
controller)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import cast

import httpx
from starlette.applications import Starlette

from yak.metadata.memory_store import MemoryMetadataStore
from yak.security.cluster_secret import ON_BEHALF_OF_HEADER
from yak_coordinator.app import create_app
from yak_coordinator.forwarding import ADMIN_BODY_LIMIT, FORWARDED_HEADER, ControllerForwarding
from yak_coordinator.service import Coordinator
from yak_coordinator.settings import CoordinatorSettings


async def test_a_standby_forwards_the_raw_path_and_refuses_oversized_bodies() -> None:
    seen: list[httpx.Request] = []

    def controller(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(404, json={"code": "UNKNOWN_TOPIC_OR_PARTITION"})

    standby = SimpleNamespace(
        is_controller=False,
        controller_url=lambda: "http://controller",
        http=httpx.AsyncClient(transport=httpx.MockTransport(controller)),
        settings=SimpleNamespace(node_id="c1"),
    )
    app = ControllerForwarding(Starlette(), cast(Coordinator, standby))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://standby") as client:
        hostile = "/admin/v1/topics/..%2F..%2Fv1%2Ftopics%2Forders"
        answer = await client.delete(hostile, headers={ON_BEHALF_OF_HEADER: "User:alice"})
        assert answer.status_code == 404
        assert seen[0].url.raw_path == hostile.encode()
        assert seen[0].headers[FORWARDED_HEADER] == "c1"
        assert seen[0].headers[ON_BEHALF_OF_HEADER] == "User:alice"  # a broker's principal
        big = await client.post("/admin/v1/topics", content=b"x" * (ADMIN_BODY_LIMIT + 1))
        assert big.status_code == 413
        assert big.json()["code"] == "MESSAGE_TOO_LARGE"
        assert len(seen) == 1
    await standby.http.aclose()


async def test_the_controller_refuses_an_oversized_admin_body() -> None:
    store = MemoryMetadataStore()
    app = create_app(CoordinatorSettings(cluster_id="unit", node_id="c0"), store=store)
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
                await asyncio.wait_for(app.state.coordinator.wait_controller(), 5)
                big = b'{"name": "' + b"x" * ADMIN_BODY_LIMIT + b'"}'
                answer = await client.post(
                    "/admin/v1/topics", content=big, headers={"content-type": "application/json"}
                )
                assert answer.status_code == 413
    finally:
        await store.aclose()
