"""Live updates: ``GET /events`` (Server-Sent Events) and ``GET /metrics/history`` (JSON).

Each new sample is pushed to every open page as two events:

- ``health`` — the health banner's HTML (under-replicated / offline partitions, unreachable
  API), which ``app.js`` swaps into every page's ``#health-banner``;
- ``metrics`` — the sample's numbers as JSON (``metrics_of``), which ``app.js`` re-dispatches
  as a ``yak:metrics`` DOM event for the page's charts and counters.

``/metrics/history`` answers the same JSON for every sample still kept, so a chart starts
with the recent past. The stream waits on the sampler (no polling); a comment every 15 s
keeps proxies from closing an idle connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from yak_console.pages.common import Pages
from yak_console.sampler import Sample

__all__ = ["metrics_of", "router"]

_KEEPALIVE_S = 15.0


def metrics_of(sample: Sample) -> dict[str, Any]:
    """The numbers of one sample that live pages show (JSON-ready; ``brokers``: the live ones)."""
    return {
        "seq": sample.seq,
        "at": sample.at,
        "produce_rate": sample.produce_rate,
        "consume_rate": sample.consume_rate,
        "under_replicated": sample.under_replicated,
        "offline": sample.offline,
        "brokers": sample.live_brokers,
        "topics": {
            topic: {
                "produce": sample.topic_produce_rates.get(topic, 0.0),
                "consume": sample.topic_consume_rates.get(topic, 0.0),
            }
            for topic in sorted({*sample.topic_produce_rates, *sample.topic_consume_rates})
        },
        "groups": {g.group_id: g.total_lag for g in sample.groups.values()},
        "errors": list(sample.errors),
    }


def _event(name: str, data: str) -> bytes:
    lines = "".join(f"data: {line}\n" for line in data.splitlines() or [""])
    return f"event: {name}\n{lines}\n".encode()


def router(pages: Pages) -> APIRouter:
    routes = APIRouter()
    sampler = pages.runtime.sampler
    banner = pages.templates.get_template("_banner.html")

    @routes.get("/events", include_in_schema=False)
    async def events(request: Request) -> StreamingResponse:
        async def stream() -> AsyncIterator[bytes]:
            last = sampler.latest.seq if sampler.latest else 0
            yield b"retry: 3000\n\n"
            while True:
                sample = await sampler.wait_next(last, _KEEPALIVE_S)
                if sample is None:
                    yield b": keepalive\n\n"
                    continue
                last = sample.seq
                yield _event("health", banner.render(sample=sample))
                yield _event("metrics", orjson.dumps(metrics_of(sample)).decode())

        del request
        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    @routes.get("/metrics/history", include_in_schema=False)
    async def history() -> Response:
        body = orjson.dumps([metrics_of(s) for s in sampler.history])
        return Response(body, media_type="application/json")

    return routes
