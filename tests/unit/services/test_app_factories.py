"""Each service's app factory builds an app that answers its health endpoints."""

import httpx
import pytest
from fastapi import FastAPI

from yak_broker.app import create_app as broker_app
from yak_console.app import create_app as console_app
from yak_coordinator.app import create_app as coordinator_app
from yak_rest_proxy.app import create_app as rest_proxy_app


@pytest.mark.parametrize(
    ("factory", "service"),
    [
        (broker_app, "broker"),
        (coordinator_app, "coordinator"),
        (rest_proxy_app, "rest-proxy"),
        (console_app, "console"),
    ],
)
async def test_health_endpoints(factory, service: str) -> None:
    app: FastAPI = factory()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        health = await client.get("/healthz")
        ready = await client.get("/readyz")
        missing = await client.get("/no-such-route")
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "service": service}
    assert ready.status_code == 200
    assert missing.status_code == 404
