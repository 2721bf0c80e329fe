"""``GET /debug/memory``: where a service's Python memory is, for finding growth in a soak.

Off unless the process starts with ``YAK_TRACEMALLOC=<frames>`` (1 to 25, the depth of the
traceback kept per allocation): tracing costs every allocation time and memory, so it is a
diagnosis switch, never a default. When on, the route answers
with the traced total and peak, the process's resident memory split into anonymous and
file-backed (``/proc/self/status``), and the allocation sites holding the most memory — the
sites' growth since the previous call too, so two calls an hour apart name what grew (Go's
``pprof`` heap profile plays this part for etcd).
"""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query
from fastapi.responses import Response

__all__ = ["ENV", "memory_router", "resident_kib", "start_from_env"]

#: The environment variable that turns tracing on, and how many frames it keeps.
ENV = "YAK_TRACEMALLOC"
_MAX_FRAMES = 25


def start_from_env(environ: dict[str, str] | None = None) -> bool:
    """Start tracing if ``YAK_TRACEMALLOC`` asks for it; True when tracing is on."""
    value = (environ if environ is not None else dict(os.environ)).get(ENV, "").strip()
    if not value:
        return tracemalloc.is_tracing()
    try:
        frames = int(value)
    except ValueError:
        raise ValueError(
            f"{ENV} must be a frame count from 1 to {_MAX_FRAMES}, not {value!r}"
        ) from None
    if not 1 <= frames <= _MAX_FRAMES:
        raise ValueError(f"{ENV} must be a frame count from 1 to {_MAX_FRAMES}, not {frames}")
    if not tracemalloc.is_tracing():
        tracemalloc.start(frames)
    return True


def resident_kib(status: str | None = None) -> dict[str, int]:
    """``VmRSS``, ``RssAnon``, ``RssFile`` and ``RssShmem`` of this process, in KiB."""
    text = status if status is not None else Path("/proc/self/status").read_text()
    wanted = {"VmRSS", "RssAnon", "RssFile", "RssShmem"}
    found: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in wanted:
            found[name] = int(rest.split()[0])
    return found


def _site(stat: Any) -> dict[str, Any]:
    frames = [f"{frame.filename}:{frame.lineno}" for frame in stat.traceback]
    return {
        "where": frames[0] if frames else "?",
        "stack": frames,
        "bytes": stat.size,
        "count": stat.count,
    }


def _json(body: dict[str, Any], status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def memory_router() -> APIRouter:
    """The ``/debug/memory`` route (include it only when ``start_from_env`` returned True)."""
    router = APIRouter(tags=["debug"])
    previous: list[tracemalloc.Snapshot] = []

    @router.get("/debug/memory")
    async def memory(top: Annotated[int, Query(ge=1, le=200)] = 25) -> Response:
        """Traced Python memory by allocation site, and its growth since the previous call."""
        if not tracemalloc.is_tracing():
            return _json({"error": f"tracing is off (start with {ENV}=1)"}, 409)
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        current, peak = tracemalloc.get_traced_memory()
        answer: dict[str, Any] = {
            "traced_bytes": current,
            "traced_peak_bytes": peak,
            "resident_kib": resident_kib(),
            "top": [_site(s) for s in snapshot.statistics("traceback")[:top]],
        }
        if previous:
            grown = snapshot.compare_to(previous[0], "traceback")
            answer["grown_since_last_call"] = [
                {**_site(s), "size_diff": s.size_diff, "count_diff": s.count_diff}
                for s in grown[:top]
            ]
        previous[:] = [snapshot]
        return _json(answer)

    return router
