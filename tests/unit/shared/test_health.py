import httpx
from fastapi import FastAPI

from yak.web.health import health_router


async def test_readiness_reports_the_reason_with_503() -> None:
    reasons: list[str | None] = ["etcd unreachable", None]

    async def ready() -> str | None:
        return reasons.pop(0)

    app = FastAPI()
    app.include_router(health_router("broker", ready))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        first = await client.get("/readyz")
        second = await client.get("/readyz")
        alive = await client.get("/healthz")
    assert first.status_code == 503
    assert first.json()["reason"] == "etcd unreachable"
    assert second.status_code == 200
    assert alive.status_code == 200
