"""``/healthz`` (the process is alive) and ``/readyz`` (it can serve traffic) for every service.

Kubernetes semantics: liveness never depends on other systems, readiness does (a broker that
lost etcd is alive but not ready). Each service passes its own readiness check.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter
from fastapi.responses import JSONResponse

__all__ = ["ReadinessCheck", "health_router"]

#: Returns None when ready, else the reason it is not.
ReadinessCheck = Callable[[], Awaitable[str | None]]


async def _always_ready() -> str | None:
    return None


def health_router(service: str, ready: ReadinessCheck = _always_ready) -> APIRouter:
    """Routes ``GET /healthz`` and ``GET /readyz`` for ``service``."""
    router = APIRouter(tags=["operations"])

    @router.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "service": service}

    @router.get("/readyz", response_model=None)
    async def readyz() -> JSONResponse:
        reason = await ready()
        if reason is None:
            return JSONResponse({"status": "ready", "service": service})
        return JSONResponse(
            {"status": "not_ready", "service": service, "reason": reason}, status_code=503
        )

    return router
