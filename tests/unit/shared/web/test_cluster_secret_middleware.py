"""``ClusterSecretMiddleware``: 401 without the secret, health checks open, the user hook."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Scope

from yak.web.cluster_secret import ClusterSecretMiddleware, is_cluster_peer

SECRET = "0123456789abcdef-secret"


async def _echo(request: Request) -> JSONResponse:
    return JSONResponse({"peer": is_cluster_peer(request.scope)})


def _client(allow: Callable[[Scope], bool] | None = None) -> httpx.AsyncClient:
    app = Starlette(routes=[Route("/v1/fetch", _echo, methods=["POST"]), Route("/healthz", _echo)])
    app.add_middleware(ClusterSecretMiddleware, secret=SECRET, allow=allow)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://broker")


async def test_a_request_without_the_secret_is_refused_with_401() -> None:
    async with _client() as client:
        for headers in ({}, {"x-yak-cluster-secret": "wrong"}):
            response = await client.post("/v1/fetch", content=b"{}", headers=headers)
            assert response.status_code == 401
            assert response.json()["code"] == "UNAUTHENTICATED"
            assert "X-Yak-Cluster-Secret" in response.json()["message"]
            challenge = response.headers["www-authenticate"]
            assert challenge.startswith("Yak-Cluster-Secret")
            assert "Bearer" not in challenge


async def test_the_secret_lets_a_request_through_marked_as_a_cluster_peer() -> None:
    async with _client() as client:
        response = await client.post("/v1/fetch", headers={"X-Yak-Cluster-Secret": SECRET})
    assert response.status_code == 200
    assert response.json() == {"peer": True}


async def test_health_checks_stay_open() -> None:
    async with _client() as client:
        assert (await client.get("/healthz")).json() == {"peer": False}


async def test_the_allow_hook_passes_user_requests_on_unmarked() -> None:
    def has_authorization(scope: Scope) -> bool:
        return any(name == b"authorization" for name, _ in scope["headers"])

    async with _client(allow=has_authorization) as client:
        response = await client.post("/v1/fetch", headers={"Authorization": "Bearer k"})
        assert response.json() == {"peer": False}
        refused = await client.post("/v1/fetch")
        assert refused.status_code == 401
        assert 'Bearer realm="yak"' in refused.headers["www-authenticate"]
