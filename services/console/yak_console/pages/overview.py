"""The overview page (``/``): brokers, the active coordinator, topic and partition counts,
live produce and consume rates."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from yak_console.pages.common import Pages

__all__ = ["router"]


def router(pages: Pages) -> APIRouter:
    routes = APIRouter()

    @routes.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def overview(request: Request) -> HTMLResponse:
        sample = await pages.runtime.sampler.current()
        return pages.render(request, "overview.html", nav="overview", sample=sample)

    return routes
